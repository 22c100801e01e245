// The channel a campaign publishes its states on: what metrics and traces of leadership subscribe to
// (src/observability/), with nothing built while nobody listens. Who campaigns is recorded nowhere
// else: a waiting campaign writes nothing to the database.
import diagnostics from 'node:diagnostics_channel';
import type { LockChannel } from '../../contract/channels.js';
import type { TermEnd } from './term.js';

/**
 * A message of `mysql-rwlock:leader`. Each campaign publishes `campaigning` once it has made its
 * first attempt, then `elected` and `ended` for each term it leads (after `ended` it campaigns
 * again, or stops), and `stopped` once closed (or ended by an error it cannot get past).
 */
export interface LeaderEvent {
  name: string;
  /** Which campaign of this process: a number unique in the process, the same on all its messages. */
  campaign: number;
  /** The owner of the campaign's manager. */
  owner: string;
  event: 'campaigning' | 'elected' | 'ended' | 'stopped';
  /** The term elected or ended; null for `campaigning` and `stopped`. */
  term: number | null;
  /** How the term ended (`ended` only). */
  how?: TermEnd;
}

export const LEADER_CHANNEL = 'mysql-rwlock:leader';

export const leaderChannel = diagnostics.channel(LEADER_CHANNEL) as unknown as LockChannel<LeaderEvent>;

let campaigns = 0;
/** The next campaign's number. */
export function nextCampaignNumber(): number {
  return ++campaigns;
}
