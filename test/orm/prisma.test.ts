// The fence on a Prisma 7 interactive transaction, through the driver adapter @prisma/adapter-mariadb
// (the mariadb connector, which speaks to MySQL and MariaDB alike). The client is generated from
// prisma/schema.prisma before the tests, into a temporary directory, and compiled with tsc
// (nodenext) as an app compiles it: the tests run the compiled JavaScript.
// covers: src/adapters/index.ts
import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { databaseUrl, parseMysqlUrl } from '../../harness/database.js';
import type { Grant } from '../../src/index.js';
import { useTestDatabase } from '../support/db.js';
import { fromPrisma } from '../../src/adapters/index.js';
import { fenceSuite } from './support/suite.js';

const db = useTestDatabase(import.meta.filename);
const ROOT = join(import.meta.dirname, '..', '..');
const SCHEMA = join(import.meta.dirname, 'prisma', 'schema.prisma');

// What the recipe uses of the generated client, declared here so that this file type-checks
// without it (it exists only once beforeAll has run `prisma generate`).
// eslint-disable-next-line @typescript-eslint/no-namespace -- the generated client's own name, as the recipe writes it
declare namespace Prisma {
  interface TransactionClient {
    loan: {
      upsert(args: {
        where: { id: string };
        create: { id: string; repaid: number };
        update: { repaid: { increment: number } };
      }): Promise<unknown>;
    };
    payment: { create(args: { data: { loanId: string; amount: number } }): Promise<unknown> };
    $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  }
}
interface PrismaClient {
  $transaction<T>(fn: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T>;
  $disconnect(): Promise<void>;
}
/** The generated class, imported once beforeAll has generated and compiled it. */
let PrismaClient: new (options: { adapter: PrismaMariaDb }) => PrismaClient;

// docs/orms.md recipe: begin
/** The client on the database at `url` (mysql://app:secret@db.internal:3306/app), through the mariadb connector. */
function connect(url: string): PrismaClient {
  const { hostname: host, port, username, password, pathname } = new URL(url);
  const adapter = new PrismaMariaDb({
    host,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
  });
  return new PrismaClient({ adapter });
}

async function repay(prisma: PrismaClient, grant: Grant, loanId: string, amount: number): Promise<void> {
  await prisma.$transaction(async (tx) => {
    await tx.loan.upsert({
      where: { id: loanId },
      create: { id: loanId, repaid: amount },
      update: { repaid: { increment: amount } },
    });
    await tx.payment.create({ data: { loanId, amount } });
    await grant.fence(fromPrisma(tx)); // last statement: LockLostError (and a rollback) if the grant was lost
  });
}
// docs/orms.md recipe: end

let workDir: string;

/** `prisma generate` from `dir`/schema.prisma into `dir`/generated. */
async function generate(dir: string): Promise<void> {
  await promisify(execFile)(
    process.execPath,
    [join(ROOT, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', join(dir, 'schema.prisma')],
    {
      cwd: dir,
      env: {
        ...process.env,
        // Every prisma command first makes sure the native schema engine is installed, and downloads it
        // when it is not (npm did not run install scripts here, and the machine may be offline).
        // `generate` never runs it: any existing file satisfies the check.
        PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? SCHEMA,
        CHECKPOINT_DISABLE: '1',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
    },
  );
}

/** `dir`/generated compiled as an app compiles it (tsc, nodenext) into `dir`/out. */
async function compile(dir: string): Promise<void> {
  await promisify(execFile)(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      ...['--strict', '--skipLibCheck', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext'],
      ...['--types', 'node', '--outDir', join(dir, 'out'), join(dir, 'generated', 'client.ts')],
    ],
    { cwd: dir },
  );
}

beforeAll(async () => {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  workDir = mkdtempSync(join(ROOT, '.tmp', 'prisma-'));
  copyFileSync(SCHEMA, join(workDir, 'schema.prisma'));
  await generate(workDir);
  // With the schema's importFileExtension "js" the generated files import each other as ./x.js,
  // which tsc accepts under nodenext and Node finds at run time.
  await compile(workDir);
  ({ PrismaClient } = (await import(pathToFileURL(join(workDir, 'out', 'client.js')).href)) as {
    PrismaClient: typeof PrismaClient;
  });
}, 120_000);

afterAll(() => {
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** What plain Node (not vitest) says when it imports `dir`/out/client.js: '' when it loads. */
async function loadError(dir: string): Promise<string> {
  const url = pathToFileURL(join(dir, 'out', 'client.js')).href;
  return promisify(execFile)(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(url)})`], {
    cwd: dir,
  }).then(
    () => '',
    (err: { stderr: string }) => err.stderr,
  );
}

it('the compiled client loads in Node; negative control: without importFileExtension = "js" it does not', async () => {
  expect(await loadError(workDir)).toBe('');
  // Without the setting Prisma takes the extension from the tsconfig.json it finds (the repository's is
  // nodenext): generated outside any, as in an app without one, the client imports ./x.ts. It is then
  // compiled in the repository, where its imports and @types/node resolve, as the recipe's is.
  const outside = mkdtempSync(join(tmpdir(), 'prisma-ts-imports-'));
  const inside = mkdtempSync(join(ROOT, '.tmp', 'prisma-ts-imports-'));
  try {
    const schema = readFileSync(SCHEMA, 'utf8');
    const without = schema.replace(/^\s*importFileExtension\s*=\s*"js"\n/m, '');
    expect(without).not.toBe(schema);
    writeFileSync(join(outside, 'schema.prisma'), without);
    await generate(outside);
    cpSync(join(outside, 'generated'), join(inside, 'generated'), { recursive: true });
    expect(readFileSync(join(inside, 'generated', 'client.ts'), 'utf8')).toMatch(/from "\.\/internal\/class\.ts"/);
    // tsc emits it (the generated files are @ts-nocheck) with the .ts paths as they are.
    await compile(inside);
    expect(await loadError(inside)).toMatch(
      /ERR_MODULE_NOT_FOUND[\s\S]*internal\/class\.ts|internal\/class\.ts[\s\S]*ERR_MODULE_NOT_FOUND/,
    );
  } finally {
    rmSync(outside, { recursive: true, force: true });
    rmSync(inside, { recursive: true, force: true });
  }
}, 120_000);

fenceSuite({
  name: 'Prisma',
  db,
  recipes: [import.meta.filename, SCHEMA],
  packages: ['prisma', '@prisma/client', '@prisma/adapter-mariadb', 'mariadb'],
  async connect({ foundRows, url = db.url }) {
    // The recipe's client has the mariadb connector's default, foundRows on; the test's own has it off.
    const { host, port, user, password } = parseMysqlUrl(url);
    const prisma = foundRows
      ? connect(databaseUrl(url, db.name))
      : new PrismaClient({
          adapter: new PrismaMariaDb({ host, port, user, password, database: db.name, connectionLimit: 2, foundRows }),
        });
    return {
      repay: (grant, loanId, amount) => repay(prisma, grant, loanId, amount),
      inTransaction: (body) => prisma.$transaction((tx) => body(fromPrisma(tx))),
      adaptClient: () => fromPrisma(prisma as unknown as Parameters<typeof fromPrisma>[0]),
      close: () => prisma.$disconnect(),
    };
  },
});
