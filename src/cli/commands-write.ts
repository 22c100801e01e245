// The commands that change lock state: release, reap, purge, migrate, and check (which changes it with --repair).
import { migrate } from '../admin/migrate.js';
import { DEFAULTS } from '../options.js';
import { purgeReleasedGrants, reapStaleGrants } from '../admin/reap-and-purge.js';
import { checkLockCounts, repairLockCounts, type CountDisagreement } from '../admin/count-check.js';
import { EXIT, UsageError, wholeNumber, type Command } from './command.js';
import { cell, duration, json, plural, table } from './format.js';

const release: Command = {
  name: 'release',
  summary: "release a live grant as an operator, noting who and why; its holder's commit will be refused",
  args: ['<grantId>'],
  options: {
    reason: { type: 'string', value: 'TEXT', help: 'why (required; at most 500 characters), kept with the release' },
  },
  details:
    'Who is recorded as cli:USER@HOST. With --json: { grantId, released, releaser, reason }. Exit 1 when the grant was not live (already released, or no such grant).',
  async run({ locks, positionals, values, json: asJson, io, operator }) {
    const grantId = wholeNumber('<grantId>', positionals[0])!;
    if (typeof values.reason !== 'string')
      throw new UsageError('--reason TEXT is required: say why, it is kept with the release');
    const released = await locks().forceRelease(grantId, { reason: values.reason });
    if (asJson) io.out(json({ grantId, released, releaser: operator, reason: values.reason }));
    else
      io.out(
        released
          ? `released grant ${grantId} as ${operator}: ${cell(values.reason)}`
          : `grant ${grantId} is not live (already released, or no such grant): nothing changed`,
      );
    return released ? EXIT.done : EXIT.nothing;
  },
};

const reap: Command = {
  name: 'reap',
  summary: 'release stale grants now, as the reaper job does',
  args: [],
  options: {
    'stale-after': {
      type: 'string',
      value: 'MS',
      help: `release live grants older than this (default: STALE_AFTER_MS as the reaper reads it, else ${DEFAULTS.staleAfterMs})`,
    },
    'batch-size': { type: 'string', value: 'N', help: `grants per transaction (default ${DEFAULTS.reap.batchSize})` },
  },
  details:
    'With --json: the result of reapStaleGrants() ({ reaped, skipped, failed, problems, grants, durationMs }). Exit 0 also when nothing was stale, so that a scheduled reap fails only when it could not do its work; 3 when a grant could not be reaped (each printed as a problem).',
  async run({ db, values, staleAfterMs, json: asJson, io }) {
    const batchSize = wholeNumber('--batch-size', values['batch-size']);
    const r = await reapStaleGrants(db(), {
      staleAfterMs,
      ...(batchSize !== undefined ? { batchSize } : {}),
    });
    if (asJson) io.out(json(r));
    else {
      io.out(
        `reaped ${plural(r.reaped, 'grant')} in ${duration(r.durationMs)}; skipped ${r.skipped} (busy committing), failed ${r.failed}`,
      );
      if (r.grants.length > 0) {
        io.out(
          table(
            ['GRANT', 'RESOURCE', 'MODE', 'OWNER', 'AGE'],
            r.grants.map((g) => [String(g.id), cell(g.resourceId), g.mode, cell(g.owner), duration(g.ageMs)]),
          ),
        );
      }
      for (const p of r.problems) io.err(`problem: ${p}`);
    }
    return r.failed > 0 ? EXIT.failed : EXIT.done;
  },
};

const purge: Command = {
  name: 'purge',
  summary: 'delete released grants older than the retention from the log',
  args: [],
  options: {
    retention: {
      type: 'string',
      value: 'MS',
      help: `keep released grants younger than this (default ${DEFAULTS.purge.retentionMs}, 7 days)`,
    },
    'batch-size': { type: 'string', value: 'N', help: `rows per statement (default ${DEFAULTS.purge.batchSize})` },
  },
  details: 'With --json: { purged, resources }. Exit 0 also when nothing was old enough.',
  async run({ db, values, json: asJson, io }) {
    const retentionMs = wholeNumber('--retention', values.retention);
    const batchSize = wholeNumber('--batch-size', values['batch-size']);
    const r = await purgeReleasedGrants(db(), {
      ...(retentionMs !== undefined ? { retentionMs } : {}),
      ...(batchSize !== undefined ? { batchSize } : {}),
    });
    io.out(asJson ? json(r) : `purged ${plural(r.purged, 'released grant')}`);
    return EXIT.done;
  },
};

const migrateCommand: Command = {
  name: 'migrate',
  summary: 'create or update the lock tables and procedures (as migrate(db) does)',
  args: [],
  options: {},
  details:
    'With --json: { applied, repaired }. Exit 0 also when the schema was already up to date, so that `migrate && start` runs on every deploy.',
  async run({ db, json: asJson, io }) {
    const r = await migrate(db());
    if (asJson) io.out(json(r));
    else if (r.applied.length === 0 && r.repaired.length === 0) io.out('schema up to date: nothing to do');
    else io.out([...r.applied.map((m) => `applied ${m}`), ...r.repaired.map((o) => `recreated ${o}`)].join('\n'));
    // Nothing to do is success: the schema is what this version needs.
    return EXIT.done;
  },
};

function countsTable(found: CountDisagreement[], note: (d: CountDisagreement) => string): string {
  return table(
    ['RESOURCE', 'W_COUNT', 'R_COUNT', 'LIVE WRITE', 'LIVE READ', 'NOTE'],
    found.map((d) => [
      cell(d.resourceId),
      d.rowMissing ? '-' : String(d.wCount),
      d.rowMissing ? '-' : String(d.rCount),
      String(d.liveWrites),
      String(d.liveReads),
      note(d),
    ]),
  );
}

const missingRow = (d: CountDisagreement): string => (d.rowMissing ? 'resource row missing' : '');

const check: Command = {
  name: 'check',
  summary: 'find resources whose counts disagree with their live grants; --repair sets them from the log',
  args: [],
  options: {
    repair: {
      type: 'boolean',
      help: "set each disagreeing count from the live grants, under the resource row's lock (safe beside traffic)",
    },
    limit: { type: 'string', value: 'N', help: 'resources per run (default 1000, at most 10000)' },
  },
  details:
    'With --json: the result of checkLockCounts() ({ disagreements, more }), or with --repair of repairLockCounts() ({ repaired, conflicting, skipped, problems, more, durationMs }). ' +
    'Exit 0 when every count agrees (with --repair: when all that disagreed were repaired); 1 when disagreements remain: found without --repair, live grants that exclude each other (release one with `release`), busy resources or more than --limit (run it again); 3 when the database refused a repair (each printed as a problem).',
  async run({ db, values, json: asJson, io }) {
    const limit = wholeNumber('--limit', values.limit);
    const options = limit !== undefined ? { limit } : {};
    if (!values.repair) {
      const r = await checkLockCounts(db(), options);
      if (asJson) io.out(json(r));
      else if (r.disagreements.length === 0) io.out('every count agrees with the live grants');
      else {
        io.out(countsTable(r.disagreements, missingRow));
        io.out(
          `${plural(r.disagreements.length, 'resource')} ${r.disagreements.length === 1 ? 'disagrees' : 'disagree'}${r.more ? ', and more' : ''}: run check --repair`,
        );
      }
      return r.disagreements.length === 0 ? EXIT.done : EXIT.nothing;
    }
    const r = await repairLockCounts(db(), options);
    if (asJson) io.out(json(r));
    else {
      io.out(`repaired ${plural(r.repaired.length, 'resource')} in ${duration(r.durationMs)}`);
      if (r.repaired.length > 0) io.out(countsTable(r.repaired, missingRow));
      if (r.conflicting.length > 0) {
        io.out(countsTable(r.conflicting, () => 'grants exclude each other: release one'));
        io.err(
          `${plural(r.conflicting.length, 'resource')} left as they are: live grants that exclude each other (see ls --prefix, then release)`,
        );
      }
      for (const id of r.skipped) io.err(`skipped ${cell(id)}: busy, run check --repair again`);
      for (const p of r.problems) io.err(`problem: ${p}`);
      if (r.more) io.err('more disagreements than --limit: run check --repair again');
    }
    if (r.problems.length > 0) return EXIT.failed;
    return r.conflicting.length + r.skipped.length === 0 && !r.more ? EXIT.done : EXIT.nothing;
  },
};

export const WRITE_COMMANDS: readonly Command[] = [release, reap, purge, migrateCommand, check];
