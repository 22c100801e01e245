// Judges a run of test/fixtures/effect-worker.ts from the database: lost updates in the effect
// chains, and overlapping grant intervals in the grant log.
import type { Knex } from 'knex';

export async function createEffectTables(db: Knex, resources: string[]): Promise<void> {
  await db.raw('CREATE TABLE counters (id VARCHAR(64) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB');
  await db.raw(
    'CREATE TABLE effects (id INT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(64), grant_id BIGINT, prev INT, next INT) ENGINE=InnoDB',
  );
  for (const r of resources) await db.raw('INSERT INTO counters VALUES (?, 0)', [r]);
}

export interface EffectVerdict {
  effects: number;
  /** Effects whose prev value was also some other effect's prev: two writers read the same value. */
  lostUpdates: number;
  /** Pairs of grant intervals on one resource that overlap where one of them is a write. */
  overlaps: number;
  writeGrants: number;
}

export async function judgeEffects(db: Knex, resources: string[]): Promise<EffectVerdict> {
  let lostUpdates = 0;
  let effects = 0;
  for (const r of resources) {
    const [[counter]] = (await db.raw('SELECT n FROM counters WHERE id = ?', [r])) as unknown as [[{ n: number }]];
    const [rows] = (await db.raw('SELECT prev FROM effects WHERE resource = ?', [r])) as unknown as [
      Array<{ prev: number }>,
    ];
    effects += rows.length;
    const distinctPrev = new Set(rows.map((x) => x.prev)).size;
    lostUpdates += rows.length - distinctPrev + Math.abs(counter.n - distinctPrev);
  }
  const [grants] = (await db.raw(
    `SELECT resource_id, lock_type, create_time AS t0, released_at AS t1 FROM t_lock_log
      WHERE released_at IS NOT NULL ORDER BY resource_id, create_time`,
  )) as unknown as [Array<{ resource_id: Buffer; lock_type: number; t0: Date; t1: Date }>];
  let overlaps = 0;
  const byResource = new Map<string, typeof grants>();
  for (const g of grants) {
    const key = g.resource_id.toString('utf8');
    byResource.set(key, [...(byResource.get(key) ?? []), g]);
  }
  for (const list of byResource.values()) {
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length && list[j]!.t0 < list[i]!.t1; j++) {
        if (list[i]!.lock_type === 0 || list[j]!.lock_type === 0) overlaps += 1;
      }
    }
  }
  return { effects, lostUpdates, overlaps, writeGrants: grants.filter((g) => g.lock_type === 0).length };
}
