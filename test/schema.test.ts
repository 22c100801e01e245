// The plain-SQL schema (sql/schema.sql) and the knex migrations create the same thing, and
// migrate() is idempotent and safe when several processes run it at once.
// covers: src/admin/migrate.ts
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Knex } from 'knex';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../migrations/index.js';
import { schemaSql } from '../scripts/schema-sql.js';
import { migrate } from '../src/admin/index.js';
import { useTestDatabase } from './support/db.js';

const migrated = useTestDatabase(`${import.meta.filename}-migrated`, { procedures: true });
const plain = useTestDatabase(`${import.meta.filename}-plain`, { migrate: false });
const racing = useTestDatabase(`${import.meta.filename}-racing`, { migrate: false });

/** Splits a mysql-client script on `;`, honouring DELIMITER lines. */
function statementsOf(script: string): string[] {
  const out: string[] = [];
  let delimiter = ';';
  let current = '';
  for (const line of script.split('\n')) {
    const d = /^DELIMITER\s+(\S+)\s*$/.exec(line);
    if (d) {
      delimiter = d[1]!;
      continue;
    }
    if (line.startsWith('--') && current.trim() === '') continue;
    current += `${line}\n`;
    if (current.trimEnd().endsWith(delimiter)) {
      out.push(current.trimEnd().slice(0, -delimiter.length).trim());
      current = '';
    }
  }
  if (current.trim()) out.push(current.trim());
  return out;
}

async function describeSchema(db: Knex, database: string): Promise<unknown> {
  const q = async (sql: string): Promise<unknown> => ((await db.raw(sql, [database])) as unknown as [unknown])[0];
  return {
    columns:
      await q(`SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA
                        FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 't\\_%' ORDER BY TABLE_NAME, ORDINAL_POSITION`),
    indexes:
      await q(`SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME FROM information_schema.STATISTICS
                       WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 't\\_%' ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`),
    // CHECK_CONSTRAINTS has no TABLE_NAME on MySQL: the table comes from TABLE_CONSTRAINTS on both.
    checks:
      await q(`SELECT tc.TABLE_NAME, cc.CONSTRAINT_NAME, cc.CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS cc
                       JOIN information_schema.TABLE_CONSTRAINTS tc
                         ON tc.CONSTRAINT_SCHEMA = cc.CONSTRAINT_SCHEMA AND tc.CONSTRAINT_NAME = cc.CONSTRAINT_NAME AND tc.CONSTRAINT_TYPE = 'CHECK'
                      WHERE cc.CONSTRAINT_SCHEMA = ? ORDER BY tc.TABLE_NAME, cc.CONSTRAINT_NAME`),
    routines: await q(`SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES
                        WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_NAME`),
  };
}

describe('schema', () => {
  it('sql/schema.sql is what `npm run schema:sql` generates from the migrations', () => {
    expect(readFileSync('sql/schema.sql', 'utf8')).toBe(schemaSql());
  });

  it('applying sql/schema.sql creates exactly what migrate() creates, and re-applying it is harmless', async () => {
    const statements = statementsOf(readFileSync('sql/schema.sql', 'utf8'));
    expect(statements.length).toBeGreaterThanOrEqual(6);
    for (let round = 0; round < 2; round++) for (const s of statements) await plain.knex.raw(s);
    const a = await describeSchema(migrated.knex, migrated.name);
    const b = await describeSchema(plain.knex, plain.name);
    expect((a as { columns: unknown[] }).columns.length).toBeGreaterThan(10);
    expect(b).toEqual(a);
  });

  it('the mysql command-line client applies sql/schema.sql as documented', () => {
    const client = ['mariadb', 'mysql'].find((c) => spawnSync(c, ['--version']).status === 0);
    if (!client) throw new Error('needs the mariadb or mysql client on PATH (apt-get install mariadb-client)');
    const u = new URL(plain.url);
    const args = [
      `-h${u.hostname}`,
      `-P${u.port || 3306}`,
      `-u${decodeURIComponent(u.username || 'root')}`,
      plain.name,
    ];
    const env = { ...process.env, MYSQL_PWD: decodeURIComponent(u.password) };
    const result = spawnSync(client, args, { input: readFileSync('sql/schema.sql'), env, encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('migrate() is idempotent', async () => {
    expect(await migrate(migrated.knex)).toEqual({ applied: [], repaired: [] });
  });

  it('several processes running migrate() at once all succeed and the schema is created once', async () => {
    const clients = Array.from({ length: 5 }, () => racing.connect({ poolMax: 2 }));
    const results = await Promise.all(clients.map((k) => migrate(k)));
    expect(results.flatMap((r) => r.applied)).toEqual(MIGRATIONS.map((m) => m.name));
    expect(await describeSchema(racing.knex, racing.name)).toEqual(await describeSchema(migrated.knex, migrated.name));
  });
});
