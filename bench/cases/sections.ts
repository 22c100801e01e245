// One-commit sections (`{ section: true }`) and multi-resource locks (`withLocks`) against the
// durable fenced operation and a plain transaction with the same business write (bench/cases/fenced.ts).
// Every case's work is that one-row UPDATE, so the ratios are the cost of the lock alone: a
// two-resource case takes two locks around the same write as its one-resource counterpart.
import type { Knex } from 'knex';
import type { Family } from '../lib/family.js';
import type { Target } from '../lib/targets.js';
import { businessUpdate } from './fenced.js';
import { createLockManager } from '../../src/index.js';

const SECTION = { section: true } as const;
const NO_HISTORY = { section: true, history: false } as const;

// A section is judged against the plain transaction it wraps and against the Redis lock around the
// same transaction (peers.ts), the unsafe lock users compare it with.
const targets: Target[] = [];
for (const c of [1, 16]) {
  targets.push({
    id: `section/redis-txn c=${c}`,
    label: 'section ÷ (Redis lock + plain txn) (distinct)',
    of: { case: 'section.write.distinct', c },
    per: { case: 'peer.redis.txn', c },
    atLeast: 1,
  });
  targets.push({
    id: `section/plain c=${c}`,
    label: 'section ÷ plain txn (distinct)',
    of: { case: 'section.write.distinct', c },
    per: { case: 'plain.txn.distinct', c },
    atLeast: c === 1 ? 0.8 : 0.75,
  });
}
// Without history: the exclusion and the commit only, no log row (docs/sections.md).
for (const c of [1, 16]) {
  targets.push({
    id: `section-no-history/redis-txn c=${c}`,
    label: 'section without history ÷ (Redis lock + plain txn) (distinct)',
    of: { case: 'section.nohistory.write.distinct', c },
    per: { case: 'peer.redis.txn', c },
    atLeast: c === 1 ? 0.95 : 0.8,
  });
  targets.push({
    id: `section-no-history/section c=${c}`,
    label: 'section without history ÷ section (distinct)',
    of: { case: 'section.nohistory.write.distinct', c },
    per: { case: 'section.write.distinct', c },
  });
}
targets.push({
  id: 'section/hot c=16',
  label: 'one hot resource: sections ÷ fenced withWriteLock, ops/s',
  of: { case: 'section.write.hot', c: 16 },
  per: { case: 'fenced.write.hot', c: 16 },
  atLeast: 2.5,
});
// The waiters as sections (handover/sections-max-wait) are declared in handover.ts, the fenced floor in fenced.ts.
for (const c of [1, 16]) {
  targets.push({
    id: `section/two-resources c=${c}`,
    label: 'two-resource withLocks section ÷ one-resource section (distinct)',
    of: { case: 'section.write2.distinct', c },
    per: { case: 'section.write.distinct', c },
    atLeast: 0.85,
  });
  targets.push({
    id: `fenced/two-resources c=${c}`,
    label: 'two-resource fenced withLocks ÷ one-resource withWriteLock (distinct)',
    of: { case: 'fenced.write2.distinct', c },
    per: { case: 'fenced.write.distinct', c },
    atLeast: 0.9,
  });
}

const pair = (prefix: string, w: number): string[] => [`${prefix}-${w}-a`, `${prefix}-${w}-b`];
const ratios = (plain: string, one?: string) => [
  { name: 'x plain tx', to: plain },
  ...(one ? [{ name: 'x one resource', to: one }] : []),
];
const update = (id: number) => (trx: Knex.Transaction) => businessUpdate(trx, id);

export const sections: Family = {
  groups: ['fenced', 'sections'],
  roundCases: ({ locks, knex }) => {
    // The same section as separate statements (no procedures): the take and commit calls of
    // migration 009 save round trips but cost the server more CPU; this case shows both.
    const statements = createLockManager({ knex, procedures: false });
    return [
      {
        id: 'section.write.distinct',
        group: 'sections',
        label: 'section withWriteLock + 1-row UPDATE, distinct',
        op: (w) => locks.withWriteLock(`sw-${w}`, update(w + 1), SECTION).then(() => true),
        ratios: [...ratios('plain.txn.distinct'), { name: 'x Redis lock + txn', to: 'peer.redis.txn' }],
      },
      {
        id: 'section.nohistory.write.distinct',
        group: 'sections',
        label: 'section without history (history: false) + 1-row UPDATE, distinct',
        op: (w) => locks.withWriteLock(`swn-${w}`, update(w + 1), NO_HISTORY).then(() => true),
        ratios: [
          ...ratios('plain.txn.distinct'),
          { name: 'x Redis lock + txn', to: 'peer.redis.txn' },
          { name: 'x section', to: 'section.write.distinct' },
        ],
      },
      {
        id: 'section.write.distinct.statements',
        group: 'sections',
        label: 'section withWriteLock as statements (procedures: false) + 1-row UPDATE, distinct',
        op: (w) => statements.withWriteLock(`sws-${w}`, update(w + 1), SECTION).then(() => true),
        ratios: [...ratios('plain.txn.distinct'), { name: 'x procedures', to: 'section.write.distinct' }],
      },
      {
        id: 'section.write.hot',
        group: 'sections',
        label: 'section withWriteLock + 1-row UPDATE, one hot',
        op: () => locks.withWriteLock('sw-hot', update(1000), SECTION).then(() => true),
        ratios: [...ratios('plain.txn.hot'), { name: 'x fenced', to: 'fenced.write.hot' }],
      },
      {
        // Where the hot resource's waiters queue: inside the take's call, or on the statements' gate read.
        id: 'section.write.hot.statements',
        group: 'sections',
        label: 'section withWriteLock as statements (procedures: false) + 1-row UPDATE, one hot',
        op: () => statements.withWriteLock('sws-hot', update(1000), SECTION).then(() => true),
        ratios: [...ratios('plain.txn.hot'), { name: 'x procedures', to: 'section.write.hot' }],
      },
      {
        id: 'fenced.write2.distinct',
        group: 'sections',
        label: 'fenced withLocks, 2 resources + 1-row UPDATE, distinct',
        op: (w) => locks.withLocks({ write: pair('fm', w) }, update(w + 1)).then(() => true),
        ratios: ratios('plain.txn.distinct', 'fenced.write.distinct'),
      },
      {
        id: 'section.write2.distinct',
        group: 'sections',
        label: 'section withLocks, 2 resources + 1-row UPDATE, distinct',
        op: (w) => locks.withLocks({ write: pair('sm', w) }, update(w + 1), SECTION).then(() => true),
        ratios: ratios('plain.txn.distinct', 'section.write.distinct'),
      },
    ];
  },
  targets,
};
