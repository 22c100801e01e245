// `npm run demo`: finds a MySQL-compatible server (MYSQL_URL, testcontainers, or a throwaway
// mariadbd), creates a fresh database, runs the chosen scenario with real worker processes, the real
// reaper job and injected faults, verifies the outcome from the database, prints the report, and
// exits 0 only when every check holds (exit codes: EXIT in config.ts).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connectKnex, createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { findServer } from '../harness/server.js';
import { migrate } from '../src/admin/index.js';
import { EXIT, parseConfig, UsageError, type DemoConfig } from './config.js';
import { runLending } from './lending/run.js';
import { formatReport, reportJson, reportNotes, type DemoReport } from './report.js';
import { runStock } from './stock/run.js';

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(config: DemoConfig): Promise<number> {
  const started = performance.now();
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
      const report: DemoReport = {
        ...partial,
        notes: [...partial.notes, ...reportNotes(partial)],
        server: server.description,
        database: name,
        totalMs: Math.round(performance.now() - started),
      };
      log(formatReport(report));
      if (config.json) {
        writeFileSync(config.json, reportJson(report));
        log(`report written to ${config.json}`);
      }
      if (!report.verdict.pass && !config.unsafe) keep = true; // an unexpected FAIL is worth a look
      return report.verdict.pass ? EXIT.pass : EXIT.fail;
    } finally {
      await db.destroy();
    }
  } finally {
    if (keep && server.kind === 'MYSQL_URL') log(`database ${name} kept for inspection`);
    else await dropDatabase(server.url, name).catch(() => undefined);
    await server.stop();
  }
}

let config: DemoConfig;
try {
  config = parseConfig(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  console.error(`demo: ${err.message} (npm run demo -- --help lists the flags)`);
  process.exit(EXIT.usage);
}
main(config).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`demo could not run: ${(err as Error).stack ?? String(err)}`);
    process.exit(EXIT.error);
  },
);
