#!/usr/bin/env node
// The `mysql-rwlock` command (see src/cli/main.ts, or `mysql-rwlock --help`).
import { main } from './main.js';

main(process.argv.slice(2), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  env: process.env,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`mysql-rwlock: ${(err as Error).message}\n`);
    process.exitCode = 3;
  },
);
