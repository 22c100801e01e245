// What `campaign()` takes besides its name and callback: validated before anything is written.
import { InvalidOptionsError } from '../../errors.js';
import { DEFAULTS, LIMITS, integerOption, optionsObject } from '../../options.js';
import { describe } from '../../options/validators.js';

/** The options of `locks.campaign(name, lead, options)`. */
export interface CampaignOptions {
  /**
   * How long a term's lease reaches ahead of its last renewal (`DEFAULTS.campaign.leaseMs`), at
   * least `LIMITS.minLeaseMs`. A leader that stops renewing (dead, paused, cut off) is replaced once
   * its lease has run out; a leader that cannot renew within it ends its own term (its `signal`
   * aborts) before the database would let a successor in.
   */
  leaseMs?: number;
  /**
   * How often the lease is renewed: a third of `leaseMs` unless given; at least 10 ms and at most
   * half of `leaseMs`, so that one renewal may fail and the next still come in time.
   */
  renewEveryMs?: number;
  /**
   * How long `close()` waits for the callback of a term that ended to settle
   * (`DEFAULTS.campaign.stopTimeoutMs`); past it, `close()` rejects with a LeadershipError
   * (`'work-stuck'`), the grant already released.
   */
  stopTimeoutMs?: number;
  /**
   * Called with what the campaign cannot throw to a caller: a leader callback that failed (a
   * LeadershipError `'work-failed'` whose `cause` is what it threw), a renewal or an acquire that
   * found the database unreachable (the campaign goes on). Without it, each is a process warning.
   */
  onError?: (error: unknown) => void;
}

export interface ResolvedCampaignOptions {
  leaseMs: number;
  renewEveryMs: number;
  stopTimeoutMs: number;
  onError: ((error: unknown) => void) | undefined;
}

const KEYS = ['leaseMs', 'renewEveryMs', 'stopTimeoutMs', 'onError'] as const;

export function resolveCampaignOptions(input: unknown): ResolvedCampaignOptions {
  const o = optionsObject('campaign', input, KEYS);
  const leaseMs = integerOption(
    'leaseMs',
    o.leaseMs ?? DEFAULTS.campaign.leaseMs,
    LIMITS.minLeaseMs,
    LIMITS.maxTimerMs,
  );
  const renewEveryMs = integerOption(
    'renewEveryMs',
    o.renewEveryMs ?? Math.floor(leaseMs / 3),
    10,
    Math.floor(leaseMs / 2),
  );
  const stopTimeoutMs = integerOption(
    'stopTimeoutMs',
    o.stopTimeoutMs ?? DEFAULTS.campaign.stopTimeoutMs,
    0,
    LIMITS.maxTimerMs,
  );
  if (o.onError !== undefined && typeof o.onError !== 'function')
    throw new InvalidOptionsError(`onError must be a function (error) => void, got ${describe(o.onError)}`);
  return { leaseMs, renewEveryMs, stopTimeoutMs, onError: o.onError as ResolvedCampaignOptions['onError'] };
}
