// `npm run demo`: finds a MySQL-compatible server (MYSQL_URL, testcontainers, or a throwaway
// mariadbd), creates a fresh database, runs the chosen scenario with real worker processes, the real
// reaper job and injected faults, verifies the outcome from the database, prints the report, and
// exits 0 only when every check holds.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connectKnex, createDatabase, databaseUrl, dropDatabase } from '../../harness/database.js';
import { findServer } from '../../harness/server.js';
import { migrate } from '../../src/index.js';
import { parseConfig } from './config.js';
import { runLending } from './lending/run.js';
import { formatReport, reportJson, type DemoReport } from './report.js';
import { runStock } from './stock/run.js';

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(): Promise<number> {
  const started = performance.now();
  const config = parseConfig(process.argv.slice(2));
  const server = await findServer({ log: (line) => log(`[server] ${line}`) });
  const name = `demo_${config.scenario}_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
  let keep = config.keep;
  try {
    log(`[server] using ${server.description}; database ${name}`);
    await createDatabase(server.url, name);
    const db = connectKnex(server.url, name, { poolMax: 4 });
    try {
      await migrate(db);
      const run = config.scenario === 'lending' ? runLending : runStock;
      const partial = await run(config, db, databaseUrl(server.url, name), log);
      const report: DemoReport = { ...partial, server: server.description, database: name, totalMs: Math.round(performance.now() - started) };
      log(formatReport(report));
      if (config.json) {
        writeFileSync(config.json, reportJson(report));
        log(`report written to ${config.json}`);
      }
      if (!report.verdict.pass && !config.unsafe) keep = true; // an unexpected FAIL is worth a look
      return report.verdict.pass ? 0 : 1;
    } finally {
      await db.destroy();
    }
  } finally {
    if (keep && server.kind === 'MYSQL_URL') log(`database ${name} kept for inspection`);
    else await dropDatabase(server.url, name).catch(() => undefined);
    await server.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`demo failed: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
