// The commands that only read: status, ls, inspect, history.
import type { ListOptions } from '../options.js';
import type { LockState } from '../sql/inspect.js';
import { EXIT, STALE_AFTER, UsageError, wholeNumber, type Command } from './command.js';
import { cell, commandLine, duration, fields, json, plural, table, time } from './format.js';

const status: Command = {
  name: 'status',
  summary:
    "counts of live, stale and leased grants, waiting writers, the oldest grant, the last hour's forced releases",
  args: [],
  options: { ...STALE_AFTER },
  details:
    "A permit grant (a semaphore's holder) counts once, whatever its permits.\nWith --json: the object locks.stats() returns ({ live: { write, read, permit }, stale, leased, waitingWriters, oldestAgeMs, sections: { write, read, oldestAgeMs }, lastHour: { reaped, operator }, staleAfterMs }).",
  async run({ locks, json: asJson, io }) {
    const s = await locks().stats();
    if (asJson) {
      io.out(json(s));
      return EXIT.done;
    }
    io.out(
      fields([
        [
          'live grants',
          `${s.live.write + s.live.read + s.live.permit} (write ${s.live.write}, read ${s.live.read}, permit ${s.live.permit})`,
        ],
        [
          'stale',
          `${s.stale} (lease run out, or older than ${duration(s.staleAfterMs)} without one: the reaper will release them)`,
        ],
        ['leased', `${s.leased} (kept from the reaper by an extended lease)`],
        ['waiting writers', `${plural(s.waitingWriters, 'resource')} with a writer waiting`],
        ['oldest grant', s.oldestAgeMs === null ? '-' : duration(s.oldestAgeMs)],
        [
          'sections',
          `${s.sections.write + s.sections.read} in progress (write ${s.sections.write}, read ${s.sections.read})` +
            (s.sections.oldestAgeMs === null ? '' : `, the oldest ${duration(s.sections.oldestAgeMs)}`),
        ],
        ['last hour', `${s.lastHour.reaped} reaped, ${s.lastHour.operator} released by an operator`],
      ]),
    );
    return EXIT.done;
  },
};

const ls: Command = {
  name: 'ls',
  summary: 'live grants and sections in progress across all resources, oldest first',
  args: [],
  options: {
    mode: {
      type: 'string',
      value: 'write|read|permit',
      help: "only grants of this mode (permit: semaphores' holders)",
    },
    owner: { type: 'string', value: 'TEXT', help: 'only grants whose owner is exactly this' },
    stale: { type: 'boolean', help: 'only grants the reaper would release now' },
    prefix: { type: 'string', value: 'TEXT', help: 'only resources whose id starts with this' },
    limit: { type: 'string', value: 'N', help: 'grants per page (default 100, at most 10000)' },
    after: { type: 'string', value: 'ID', help: 'the page after this grant id (the last id of the previous page)' },
    ...STALE_AFTER,
  },
  details:
    'MODE says "section" for a one-commit section in progress, "permit × N of L" for a holder of N permits of a semaphore of L.\nWith --json: an array of locks.list() rows ({ id, resourceId, mode, owner, createTime, ageMs, leaseUntil, stale, writerWaiting, section, and for a permit grant permits and permitLimit }); the next page is --after the last id. Exit 0 also when no grant matched (it says so; with --json: []).',
  async run({ locks, values, json: asJson, io }) {
    const mode = values.mode;
    if (mode !== undefined && mode !== 'write' && mode !== 'read' && mode !== 'permit')
      throw new UsageError(`--mode must be write, read or permit, got ${JSON.stringify(mode)}`);
    const options: ListOptions = {
      ...(mode ? { mode } : {}),
      ...(typeof values.owner === 'string' ? { owner: values.owner } : {}),
      ...(values.stale ? { staleOnly: true } : {}),
      ...(typeof values.prefix === 'string' ? { resourcePrefix: values.prefix } : {}),
    };
    const limit = wholeNumber('--limit', values.limit);
    const after = wholeNumber('--after', values.after);
    if (limit !== undefined) options.limit = limit;
    if (after !== undefined) options.after = after;
    const { grants, next } = await locks().list(options);
    if (asJson) io.out(json(grants));
    else if (grants.length === 0) io.out('no live grants matched');
    else {
      io.out(
        table(
          ['GRANT', 'RESOURCE', 'MODE', 'OWNER', 'AGE', 'LEASE UNTIL', 'STALE', 'WRITER WAITING'],
          grants.map((g) => [
            String(g.id),
            cell(g.resourceId),
            modeCell(g),
            cell(g.owner),
            duration(g.ageMs),
            time(g.leaseUntil),
            g.stale ? 'STALE' : '',
            g.writerWaiting ? 'yes' : '',
          ]),
        ),
      );
      if (next !== null) {
        // The same query's next page: every filter repeated (a page without them lists other grants),
        // text values as --name=VALUE so that one starting with '-' stays a value.
        const text = (name: string): string[] =>
          typeof values[name] === 'string' ? [`--${name}=${values[name] as string}`] : [];
        io.out(
          `more: ${commandLine([
            'mysql-rwlock',
            'ls',
            ...text('mode'),
            ...text('owner'),
            ...(values.stale ? ['--stale'] : []),
            ...text('prefix'),
            ...text('stale-after'),
            ...(limit !== undefined ? ['--limit', String(limit)] : []),
            '--after',
            String(next),
          ])}`,
        );
      }
    }
    // Nothing matched is an answer, not a failure: a script reads the (empty) list.
    return EXIT.done;
  },
};

/** A grant's MODE cell: a section's mode, a permit grant's count of permits. */
function modeCell(g: { mode: string; section: boolean; permits?: number; permitLimit?: number }): string {
  if (g.section) return `${g.mode} section`;
  if (g.permits === undefined) return g.mode;
  return `permit × ${g.permits}${g.permitLimit === undefined ? '' : ` of ${g.permitLimit}`}`;
}

/** What holds a resource: durable grants by their counts, sections in progress by their rows. */
function heldBy(state: LockState): string {
  if (state.permitLimit !== null)
    return `${plural(state.live.read, 'permit')} of ${state.permitLimit} (${plural(state.holders.filter((h) => !h.section).length, 'holder')})`;
  if (state.live.write > 0) return 'write';
  if (state.live.read > 0) return `read × ${state.live.read}`;
  const sections = state.holders.filter((h) => h.section);
  if (sections.some((h) => h.mode === 'write')) return 'write (section in progress)';
  if (sections.length > 0) return `read × ${sections.length} (sections in progress)`;
  return 'free';
}

const inspect: Command = {
  name: 'inspect',
  summary: 'one resource: its counts, waiting writer and live grants',
  args: ['<resourceId>'],
  options: { ...STALE_AFTER },
  details:
    'MODE says "section" for a one-commit section in progress, "permit × N" for a holder of N permits of a semaphore, whose limit HELD names.\nWith --json: the object locks.inspect() returns ({ resourceId, live: { write, read }, permitLimit, writerWaiting, holders }; live.read counts the permits held). Exit 1 when the resource has no live grant and no section in progress.',
  async run({ locks, positionals, json: asJson, io }) {
    const state = await locks().inspect(positionals[0]!);
    if (asJson) io.out(json(state));
    else {
      io.out(
        fields([
          ['resource', cell(state.resourceId)],
          ['held', heldBy(state)],
          ...(state.permitLimit === null
            ? []
            : ([['permit limit', `${state.permitLimit} (the semaphore's limit, as its holders took it)`]] as Array<
                [string, string]
              >)),
          ['writer waiting', state.writerWaiting ? 'yes' : 'no'],
        ]),
      );
      if (state.holders.length > 0) {
        io.out('');
        io.out(
          table(
            ['GRANT', 'MODE', 'OWNER', 'GRANTED AT', 'AGE', 'LEASE UNTIL', 'STALE'],
            state.holders.map((h) => [
              String(h.id),
              modeCell(h),
              cell(h.owner),
              time(h.createTime),
              duration(h.ageMs),
              time(h.leaseUntil),
              h.stale ? 'STALE' : '',
            ]),
          ),
        );
      }
    }
    return state.holders.length > 0 ? EXIT.done : EXIT.nothing;
  },
};

const history: Command = {
  name: 'history',
  summary: "one resource's grants, newest first, with how each ended",
  args: ['<resourceId>'],
  options: {
    limit: { type: 'string', value: 'N', help: 'grants per page (default 50, at most 10000)' },
    before: {
      type: 'string',
      value: 'ID',
      help: 'only grants older than this grant id (the last id of the previous page)',
    },
  },
  details:
    'ENDED BY is holder, reaper, operator, withdrawn (a lost acquire settled as never granted) or live.\nWith --json: { grants, next } as locks.history() returns it. Exit 1 when the resource has no grant in the log.',
  async run({ locks, positionals, values, json: asJson, io }) {
    const limit = wholeNumber('--limit', values.limit);
    const before = wholeNumber('--before', values.before);
    const page = await locks().history(positionals[0]!, {
      ...(limit !== undefined ? { limit } : {}),
      ...(before !== undefined ? { before } : {}),
    });
    if (asJson) io.out(json(page));
    else if (page.grants.length === 0) io.out('no grants in the log for this resource');
    else {
      io.out(
        table(
          ['GRANT', 'MODE', 'OWNER', 'GRANTED AT', 'HELD', 'ENDED BY', 'ENDED AT', 'RELEASER', 'REASON'],
          page.grants.map((g) => [
            String(g.id),
            g.mode,
            cell(g.owner),
            time(g.createTime),
            duration(g.heldMs),
            g.releasedBy ?? 'live',
            time(g.releasedAt),
            cell(g.releaser ?? ''),
            cell(g.reason ?? ''),
          ]),
        ),
      );
      if (page.next !== null) {
        io.out(
          `more: ${commandLine(['mysql-rwlock', 'history', ...(limit !== undefined ? ['--limit', String(limit)] : []), '--before', String(page.next), '--', positionals[0]!])}`,
        );
      }
    }
    return page.grants.length > 0 ? EXIT.done : EXIT.nothing;
  },
};

export const READ_COMMANDS: readonly Command[] = [status, ls, inspect, history];
