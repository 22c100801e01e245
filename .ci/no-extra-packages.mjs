#!/usr/bin/env node
// Fails if an app's node_modules holds any ORM, NestJS, Express/Fastify or OpenTelemetry package:
// `npm install mysql-rwlock` must pull none of them (they are the user's choice, optional peers at most).
//   node .ci/no-extra-packages.mjs <app dir>
// Every node_modules folder under <app dir> is walked (nested ones too), so a package npm could not
// hoist is found as well. Exit 1 lists each package found and where.
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

const FORBIDDEN = [
  /^prisma$/,
  /^@prisma\//,
  /^typeorm$/,
  /^sequelize$/,
  /^drizzle-orm$/,
  /^kysely$/,
  /^@mikro-orm\//,
  /^@nestjs\//,
  /^@opentelemetry\//,
  /^express$/,
  /^fastify$/,
  /^reflect-metadata$/,
];

const app = process.argv[2];
if (!app || !existsSync(join(app, 'node_modules'))) {
  console.error('usage: node .ci/no-extra-packages.mjs <app dir with node_modules>');
  process.exit(2);
}

/** [name, path] of every package installed under the node_modules folder `dir`, nested ones included. */
function installed(dir) {
  const found = [];
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('.')) continue;
    const names = entry.startsWith('@') ? readdirSync(join(dir, entry)).map((n) => `${entry}/${n}`) : [entry];
    for (const name of names) {
      const path = join(dir, name);
      found.push([name, path]);
      if (existsSync(join(path, 'node_modules'))) found.push(...installed(join(path, 'node_modules')));
    }
  }
  return found;
}

const all = installed(join(app, 'node_modules'));
const extra = all.filter(([name]) => FORBIDDEN.some((re) => re.test(name)));
if (extra.length) {
  for (const [name, path] of extra) console.error(`installed, but must not be: ${name} (${relative(app, path)})`);
  process.exit(1);
}
console.log(`${all.length} packages installed; no ORM, NestJS, Express, Fastify or OpenTelemetry package among them`);
