// `mysql-rwlock leaders [name]`: who leads each leader name, and a name's recent terms with how each
// ended, as the grant log tells them (src/sql/terms.ts).
import { withConnection } from '../sql/connection.js';
import {
  databaseNow,
  LEADERS_VIEW_DEFAULTS,
  leadersView,
  termsOf,
  writersWaiting,
  type TermRecord,
} from '../sql/terms.js';
import { resourceKey } from '../lock/durable/resource-id.js';
import { LIMITS } from '../options.js';
import { EXIT, UsageError, wholeNumber, type Command } from './command.js';
import { cell, duration, json, table, time } from './format.js';

/** How a term ended, or stands, for people; `now` is the database clock. */
export function howText(t: TermRecord, now: Date): string {
  const ago = (d: Date | null): string => (d === null ? '' : `${duration(now.getTime() - d.getTime())} ago`);
  switch (t.how) {
    case 'leading':
      return `leading (lease ${duration(t.leaseUntil!.getTime() - now.getTime())} left)`;
    case 'lease-ran-out':
      return `LEASE RAN OUT ${ago(t.leaseUntil)} (the reaper, or a campaigner's next attempt, releases it)`;
    case 'unleased':
      return 'granted, never leased (a campaigner before its first lease, or one that died there)';
    case 'resigned':
      return 'resigned (released by its leader: resign, close, a failed callback or a late renewal)';
    case 'reaped':
      return 'REAPED (its lease ran out; released by the reaper)';
    case 'healed':
      return `healed by ${cell(t.releaser ?? '?')} (its lease ran out)`;
    case 'operator':
      return `released by operator ${cell(t.releaser ?? '?')}${t.reason ? `: ${cell(t.reason)}` : ''}`;
    case 'unknown':
      return 'ended (unknown)';
  }
}

function termsTable(terms: TermRecord[], now: Date): string {
  return table(
    ['TERM', 'OWNER', 'SINCE', 'ENDED', 'LED', 'HOW'],
    terms.map((t) => [
      String(t.term),
      cell(t.owner),
      time(t.since),
      time(t.endedAt),
      duration((t.endedAt ?? now).getTime() - t.since.getTime()),
      howText(t, now),
    ]),
  );
}

/** The headline of one name: who leads, or that no term does and how the last one stands. */
function headline(name: string, terms: TermRecord[], now: Date): string {
  const [last] = terms;
  if (last === undefined) return `${cell(name)}: no term leads; the log holds no write grant of it`;
  if (last.how === 'leading')
    return `${cell(name)}: led by ${cell(last.owner)} in term ${last.term} since ${time(last.since)} (${duration(now.getTime() - last.since.getTime())}), lease until ${time(last.leaseUntil)}`;
  return `${cell(name)}: no term leads; the last, ${last.term} (${cell(last.owner)}): ${howText(last, now)}`;
}

export const LEADERS_COMMAND: Command = {
  name: 'leaders',
  aliases: ['leader'],
  summary: "who leads each leader name (locks.campaign), and a name's recent terms with how each ended",
  args: ['[name]'],
  options: {
    limit: {
      type: 'string',
      value: 'N',
      help: `with a name: its newest N terms (default ${LEADERS_VIEW_DEFAULTS.terms})`,
    },
  },
  details:
    "Without a name: every name whose live write grant holds a lease (a term, leading or with its lease run out; the log does not tell a term from another leased write grant, such as an exclusive job's lockAtLeastFor hold). " +
    'With a name: its terms, newest first, with how each ended: leading, LEASE RAN OUT, resigned (released by its leader: the log does not say whether by resign, close or a failed callback), REAPED, healed by a successor, or released by an operator. ' +
    "WAITING says a writer waits for the name (its writer-intent mark, which a waiting campaign sets): that one waits, not who; who campaigns is in no database but in each process's campaigns gauge (docs/leader.md).\n" +
    'With --json: without a name { now, names: [{ name, leading, terms, writerWaiting }], truncated }; with one { now, name, leading, writerWaiting, terms: [{ term, owner, since, endedAt, leaseUntil, how, releaser, reason }] }. ' +
    'Exit 0 also when no name is found; with a name, exit 1 when no term of it leads.',
  async run({ db, positionals, values, json: asJson, io }) {
    const name = positionals[0];
    if (name === undefined) {
      if (values.limit !== undefined) throw new UsageError('--limit needs a name');
      const view = await withConnection(db(), (conn) =>
        leadersView(conn, { names: [], termsPerName: 2, maxNames: LEADERS_VIEW_DEFAULTS.maxNames }),
      );
      if (asJson) io.out(json(view));
      else if (view.names.length === 0) io.out('no leader names: no live write grant holds a lease');
      else {
        io.out(
          table(
            ['NAME', 'LEADER', 'TERM', 'SINCE', 'STATE', 'WAITING', 'BEFORE IT'],
            view.names.map(({ name: n, terms: [t, before], writerWaiting }) => [
              cell(n),
              cell(t!.owner),
              String(t!.term),
              time(t!.since),
              howText(t!, view.now),
              writerWaiting ? 'yes' : '-',
              before === undefined ? '-' : `${before.term}: ${howText(before, view.now)}`,
            ]),
          ),
        );
        if (view.truncated) io.out(`more than ${LEADERS_VIEW_DEFAULTS.maxNames} names: the first by name are shown`);
      }
      return EXIT.done;
    }
    const limit = wholeNumber('--limit', values.limit) ?? LEADERS_VIEW_DEFAULTS.terms;
    if (limit < 1 || limit > LIMITS.maxPageSize)
      throw new UsageError(`--limit must be 1 to ${LIMITS.maxPageSize}, got ${limit}`);
    const resource = resourceKey(name);
    const { now, terms, writerWaiting } = await withConnection(db(), async (conn) => ({
      now: await databaseNow(conn),
      terms: await termsOf(conn, resource, limit),
      writerWaiting: (await writersWaiting(conn, [resource])).size > 0,
    }));
    const leading = terms[0]?.how === 'leading' ? terms[0] : null;
    if (asJson) io.out(json({ now, name, leading, writerWaiting, terms }));
    else {
      io.out(headline(name, terms, now));
      if (writerWaiting) io.out("a writer waits for it: a campaigner (who, each process's campaigns gauge says)");
      if (terms.length > 0) io.out(`\n${termsTable(terms, now)}`);
    }
    return leading === null ? EXIT.nothing : EXIT.done;
  },
};
