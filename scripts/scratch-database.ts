// A database to try things against, for scripts such as .ci/pack-check.sh: finds a server the way the
// tests do (MYSQL_URL, else testcontainers, else a throwaway mariadbd; see harness/server.ts),
// creates a fresh database on it and prints its URL as the first line of stdout. It then stays up
// until SIGTERM or SIGINT, and drops the database (and stops a throwaway server) before it exits.
// Progress goes to stderr.
//   node --import tsx scripts/scratch-database.ts > url.txt &
import { randomBytes } from 'node:crypto';
import { createDatabase, databaseUrl, dropDatabase } from '../harness/database.js';
import { findServer } from '../harness/server.js';

const server = await findServer({ log: (line) => process.stderr.write(`[server] ${line}\n`) });
const name = `scratch_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
try {
  await createDatabase(server.url, name);
} catch (err) {
  await server.stop();
  throw err;
}
process.stderr.write(`[server] using ${server.description}; database ${name}\n`);
process.stdout.write(`${databaseUrl(server.url, name)}\n`);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await dropDatabase(server.url, name).catch((err: unknown) =>
    process.stderr.write(`[server] could not drop ${name}: ${(err as Error).message}\n`),
  );
  await server.stop();
  process.exit(0);
}
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
setInterval(() => undefined, 1 << 30); // stay up until a signal
