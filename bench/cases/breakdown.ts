// Where a section's time goes at concurrency 1: the p50 of the plain transaction and of the section
// (from the interleaved rounds), and what each operation sends the server, counted on a knex of its
// own, one operation at a time:
// - round trips: the commands its mysql2 connections send (a query, a CALL or a multi-statement is
//   one; a prepared statement's prepare and execute are two), counted by wrapping each connection's
//   `addCommand`, through which mysql2 sends every command;
// - statements: the server's own session counters (`Questions`, and `Com_*` by kind), read on each of
//   those connections before and after, less what the reading itself adds. `Questions` counts a
//   CALL as one statement, not the statements inside the procedure.
// Session counters belong to the connection, so other clients of a shared server do not disturb them.
import knexFactory, { type Knex } from 'knex';
import { parseMysqlUrl } from '../../harness/database.js';
import { createLockManager, type LockManager } from '../../src/index.js';
import type { Family, Metrics, Results } from '../lib/family.js';
import { fmt } from '../lib/format.js';
import { businessUpdate } from './fenced.js';

/** A mysql2 (callback) connection as knex's pool creates it: the two methods used here. */
interface RawConnection {
  addCommand(cmd: unknown): unknown;
  query(sql: string, cb: (err: Error | null, rows: unknown) => void): void;
}

type Counters = Map<string, number>;

interface Measured {
  id: string;
  label: string;
  /** The round case whose p50 at concurrency 1 is printed beside it. */
  roundCase: string;
  /** `statements`: a manager on the same knex that never calls a procedure (`procedures: false`). */
  op(locks: LockManager, knex: Knex, statements: LockManager): Promise<unknown>;
}

const SECTION = { section: true } as const;
const update = (trx: Knex.Transaction): Promise<unknown> => businessUpdate(trx, 1);

const MEASURED: Measured[] = [
  {
    id: 'breakdown.plain',
    label: 'plain transaction',
    roundCase: 'plain.txn.distinct',
    op: (_, knex) => knex.transaction(update),
  },
  {
    id: 'breakdown.section',
    label: 'section',
    roundCase: 'section.write.distinct',
    op: (locks) => locks.withWriteLock('bd-section', update, SECTION),
  },
  {
    id: 'breakdown.section.statements',
    label: 'section as statements (procedures: false)',
    roundCase: 'section.write.distinct.statements',
    op: (_, __, statements) => statements.withWriteLock('bd-section-st', update, SECTION),
  },
  {
    id: 'breakdown.section2',
    label: 'two-resource section',
    roundCase: 'section.write2.distinct',
    op: (locks) => locks.withLocks({ write: ['bd-section2-a', 'bd-section2-b'] }, update, SECTION),
  },
  {
    id: 'breakdown.fenced',
    label: 'fenced withWriteLock',
    roundCase: 'fenced.write.distinct',
    op: (locks) => locks.withWriteLock('bd-fenced', update),
  },
  {
    id: 'breakdown.fenced2',
    label: 'two-resource fenced withLocks',
    roundCase: 'fenced.write2.distinct',
    op: (locks) => locks.withLocks({ write: ['bd-fenced2-a', 'bd-fenced2-b'] }, update),
  },
];

function status(conn: RawConnection): Promise<Counters> {
  return new Promise((resolve, reject) =>
    conn.query('SHOW SESSION STATUS', (err, rows) => {
      if (err) return reject(err);
      const out: Counters = new Map();
      for (const r of rows as Array<{ Variable_name: string; Value: string }>) {
        if (r.Variable_name === 'Questions' || r.Variable_name.startsWith('Com_'))
          out.set(r.Variable_name, Number(r.Value));
      }
      resolve(out);
    }),
  );
}

/** `a - b` by counter, for the counters that moved. */
function minus(a: Counters, b: Counters | undefined): Counters {
  const out: Counters = new Map();
  for (const [k, v] of a) if (v !== (b?.get(k) ?? 0)) out.set(k, v - (b?.get(k) ?? 0));
  return out;
}

/** A knex whose connections count the commands they send (while `counting`), and read their counters. */
function countingKnex(url: string, database: string) {
  const connections = new Set<RawConnection>();
  let commands = 0;
  let counting = false;
  const knex = knexFactory({
    client: 'mysql2',
    connection: { ...parseMysqlUrl(url), database },
    pool: {
      min: 0,
      max: 4,
      afterCreate: (conn: RawConnection, done: (err: Error | null, conn: unknown) => void) => {
        const send = conn.addCommand.bind(conn);
        conn.addCommand = (cmd) => {
          if (counting) commands++;
          return send(cmd);
        };
        connections.add(conn);
        done(null, conn);
      },
    },
  });
  /** Every connection's counters now (none of them is in use between operations at concurrency 1). */
  const snapshot = async (): Promise<Map<RawConnection, Counters>> =>
    new Map(await Promise.all([...connections].map(async (c) => [c, await status(c)] as const)));
  return {
    knex,
    /** Runs `op` `n` times one after the other: commands sent and counters moved, summed over connections. */
    async measure(op: () => Promise<unknown>, n: number): Promise<{ commands: number; moved: Counters }> {
      const before = await snapshot();
      const again = await snapshot();
      // what one reading adds to a connection's counters (SHOW STATUS is itself a statement)
      const reading = minus([...again.values()][0] ?? new Map(), [...before.values()][0]);
      commands = 0;
      counting = true;
      for (let i = 0; i < n; i++) await op();
      counting = false;
      const sent = commands;
      const after = await snapshot();
      const moved: Counters = new Map();
      for (const [conn, counters] of after) {
        for (const [k, v] of minus(minus(counters, again.get(conn)), again.has(conn) ? reading : undefined)) {
          moved.set(k, (moved.get(k) ?? 0) + v);
        }
      }
      return { commands: sent, moved };
    },
  };
}

/** Per operation: whole when it is (it should be: every operation sends the same), else to 2 places. */
const count = (v: number | undefined): string => (v !== undefined && Number.isInteger(v) ? String(v) : fmt(v, 2));

const perOp = (r: Results, id: string): string => {
  const m = r.get(id);
  if (!m) return 'n/a';
  const kinds = Object.entries(m)
    .filter(([k, v]) => k.startsWith('Com_') && v)
    .map(([k, v]) => `${k.slice(4)} ${count(v)}`)
    .join(', ');
  return `${count(m.statements)} in ${count(m.roundTrips)} round trips (Com_* by kind, statements inside procedures included: ${kinds})`;
};

export const breakdown: Family = {
  groups: ['sections', 'breakdown'],
  async run({ server, dbName, quick, log }, results) {
    const n = quick ? 20 : 100;
    const counting = countingKnex(server.url, dbName);
    const locks = createLockManager({ knex: counting.knex });
    const statements = createLockManager({ knex: counting.knex, procedures: false });
    try {
      for (const m of MEASURED) {
        log(`[bench] breakdown: ${m.label}, ${n} operations one at a time`);
        for (let i = 0; i < 5; i++) await m.op(locks, counting.knex, statements); // rows created, schema checked
        const { commands, moved } = await counting.measure(() => m.op(locks, counting.knex, statements), n);
        const metrics: Metrics = { n, roundTrips: commands / n, statements: (moved.get('Questions') ?? 0) / n };
        for (const [k, v] of moved) if (k.startsWith('Com_')) metrics[k] = v / n;
        results.set(m.id, metrics);
      }
    } finally {
      await locks.close();
      await statements.close();
      await counting.knex.destroy();
    }
  },
  summary(results) {
    const p50 = (m: Measured): string => fmt(results.value(m.roundCase, 'p50', 1), 2);
    const plain = MEASURED[0]!;
    const section = MEASURED[1]!;
    const plainP50 = results.value(plain.roundCase, 'p50', 1);
    const sectionP50 = results.value(section.roundCase, 'p50', 1);
    const extraTrips =
      (results.value(section.id, 'roundTrips') ?? NaN) - (results.value(plain.id, 'roundTrips') ?? NaN);
    const redisP50 = results.value('peer.redis.txn', 'p50', 1);
    return [
      `where a section's time goes, concurrency 1: p50 plain transaction ${fmt(plainP50, 2)} ms, section ${fmt(sectionP50, 2)} ms` +
        (plainP50 !== undefined && sectionP50 !== undefined
          ? ` (+${fmt(sectionP50 - plainP50, 2)} ms for ${count(extraTrips)} more round trips)`
          : '') +
        (redisP50 !== undefined ? `; Redis lock + plain transaction ${fmt(redisP50, 2)} ms` : ''),
      `statements per plain transaction: ${perOp(results, plain.id)}`,
      `statements per section: ${perOp(results, section.id)}`,
      ...MEASURED.slice(2).map(
        (m) => `statements per ${m.label}: ${perOp(results, m.id)}; p50 ${p50(m)} ms at concurrency 1`,
      ),
    ];
  },
  targets: [],
};
