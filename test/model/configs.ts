/**
 * The bounds each run checks (see docs/design.md, "The model"): clients, lock cycles per client,
 * lost replies in the whole run, and whether the one asynchronous failover may happen.
 */
export const TWO_CLIENTS_LOST_REPLIES = ['-DNC=2', '-DNACQ=1', '-DNLOST=1', '-DNOFAILOVER'];
export const TWO_CLIENTS_FAILOVER = ['-DNC=2', '-DNACQ=1', '-DNLOST=0'];
export const THREE_CLIENTS = ['-DNC=3', '-DNACQ=1', '-DNLOST=0', '-DNOFAILOVER'];
export const SMALL = ['-DNC=2', '-DNACQ=1', '-DNLOST=0', '-DNOFAILOVER'];
