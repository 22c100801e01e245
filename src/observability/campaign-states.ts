// This process's campaigns by name and state, kept from the `mysql-rwlock:leader` channel: what the
// Prometheus gauge and the OpenTelemetry gauge of campaigns read. A waiting campaign writes nothing
// to the database, so who campaigns is known only here, in each process; the fleet's count is the
// sum of the processes' gauges.
import diagnostics from 'node:diagnostics_channel';
import { LEADER_CHANNEL, type LeaderEvent } from '../lock/leader/channel.js';

/** The states a campaign is counted in: leading a term, or waiting (or standing aside) to lead one. */
export const CAMPAIGN_STATES = Object.freeze(['leading', 'campaigning'] as const);
export type CampaignState = (typeof CAMPAIGN_STATES)[number];

export interface CampaignCount {
  name: string;
  state: CampaignState;
  count: number;
}

export interface CampaignStates {
  /**
   * For every name met since tracking began, the campaigns of this process in each state; a name
   * whose campaigns all stopped stays, at 0, so that a graph shows it fall rather than vanish.
   */
  counts(): CampaignCount[];
  /** Stops listening. */
  stop(): void;
}

/**
 * Starts counting. A campaign is counted from its first message after this: one that began before
 * and has not changed state since is not seen, so register the metrics at start-up, before any
 * campaign begins (as every metric of this package counts from its registration). `onEvent` is
 * called with each message once it is counted (the OpenTelemetry term spans use it).
 */
export function trackCampaigns(onEvent?: (event: LeaderEvent) => void): CampaignStates {
  const states = new Map<number, { name: string; state: CampaignState }>();
  const names = new Set<string>();
  const listener = (message: unknown): void => {
    const m = message as LeaderEvent;
    names.add(m.name);
    // `ended`: the campaign goes on (standing aside after a resignation counts as campaigning: it
    // leads again when nobody else does) unless `stopped` follows.
    if (m.event === 'stopped') states.delete(m.campaign);
    else states.set(m.campaign, { name: m.name, state: m.event === 'elected' ? 'leading' : 'campaigning' });
    onEvent?.(m);
  };
  diagnostics.subscribe(LEADER_CHANNEL, listener);
  return {
    counts() {
      const out = new Map<string, CampaignCount>();
      for (const name of [...names].sort())
        for (const state of CAMPAIGN_STATES) out.set(`${state}\u0000${name}`, { name, state, count: 0 });
      for (const c of states.values()) out.get(`${c.state}\u0000${c.name}`)!.count++;
      return [...out.values()];
    },
    stop() {
      diagnostics.unsubscribe(LEADER_CHANNEL, listener);
    },
  };
}
