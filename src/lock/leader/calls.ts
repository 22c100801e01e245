// The manager's leadership calls: `campaign`, `leader` and `terms`.
import type { Target } from '../durable/durable-acquire.js';
import { resourceKey } from '../durable/resource-id.js';
import type { LockContext } from '../context/lock-context.js';
import { InvalidOptionsError } from '../../errors.js';
import { withConnection } from '../../sql/connection.js';
import { readLeader, type LeaderInfo } from '../../sql/leader.js';
import { termsOf, type TermRecord } from '../../sql/terms.js';
import { DEFAULTS, integerOption, LIMITS, optionsObject, type HistoryOptions } from '../../options.js';
import { describe } from '../../options/validators.js';
import { RunningCampaign, type Campaign, type LeadWork } from './campaign.js';
import { resolveCampaignOptions } from './campaign-options.js';

/** A manager's campaigns in progress, which its `close()` closes. */
export class Campaigns {
  readonly #running = new Set<RunningCampaign>();

  /** `campaign`: validated (nothing written on bad input), the first attempt made, then the loop. */
  async start(ctx: LockContext, name: string, lead: LeadWork, options: unknown): Promise<Campaign> {
    const t: Target = { mode: 'write', resourceId: name, resource: resourceKey(name) };
    if (typeof lead !== 'function')
      throw new InvalidOptionsError(`lead: campaign needs a function (term) => unknown, got ${describe(lead)}`);
    const o = resolveCampaignOptions(options);
    const campaign = new RunningCampaign(ctx, t, lead, o, () => this.#running.delete(campaign));
    this.#running.add(campaign);
    try {
      return await campaign.begin();
    } catch (err) {
      this.#running.delete(campaign);
      throw err;
    }
  }

  /** Closes every campaign; a callback that will not settle is the campaign's own report, not the manager's. */
  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.#running].map((c) => c.close()));
  }
}

/** `leader`: the term that leads `name`, or null. */
export async function leaderCall(ctx: LockContext, name: string): Promise<LeaderInfo | null> {
  const t: Target = { mode: 'write', resourceId: name, resource: resourceKey(name) };
  return withConnection(ctx.knex, (conn) => readLeader(conn, t.resource));
}

/** `terms`: the name's terms, newest first, a page at a time as `history` pages its grants. */
export async function termsCall(
  ctx: LockContext,
  name: string,
  options: HistoryOptions | undefined,
): Promise<{ terms: TermRecord[]; next: number | null }> {
  const resource = resourceKey(name);
  const o = optionsObject('terms', options, ['limit', 'before']);
  const limit = integerOption('limit', o.limit ?? DEFAULTS.history.limit, 1, LIMITS.maxPageSize);
  const before = o.before === undefined ? undefined : integerOption('before', o.before, 1);
  const terms = await withConnection(ctx.knex, (conn) => termsOf(conn, resource, limit, before));
  return { terms, next: terms.length === limit ? terms[terms.length - 1]!.term : null };
}
