// `import ... from 'mysql-rwlock/tracing'` as an app writes it: every name the entry exports is
// imported and used (see index.ts beside this file for why and how to update it). Node's channels are
// typed with the library's own channel types, with no cast, under every @types/node the matrix tries.
import diagnostics from 'node:diagnostics_channel';
import {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type ReleaseContext,
  type ReapContext,
  type LostContext,
  type LockChannel,
  type LockTracingChannel,
  type LockTracingHandlers,
} from 'mysql-rwlock/tracing';

export function trace(): () => void {
  const acquire: LockTracingChannel<AcquireContext> = diagnostics.tracingChannel(CHANNELS.acquire);
  const fence: LockTracingChannel<FenceContext> = diagnostics.tracingChannel(CHANNELS.fence);
  const release: LockTracingChannel<ReleaseContext> = diagnostics.tracingChannel(CHANNELS.release);
  const reap: LockTracingChannel<ReapContext> = diagnostics.tracingChannel(CHANNELS.reap);
  const started = new WeakMap<AcquireContext, number>();
  const acquireHandlers: LockTracingHandlers<AcquireContext> = {
    start: (c) => void started.set(c, performance.now()),
    asyncEnd: (c) =>
      console.log(c.resourceId, c.mode, c.result ? 'granted' : 'busy', performance.now() - (started.get(c) ?? 0)),
  };
  acquire.subscribe(acquireHandlers);
  fence.subscribe({ error: (c) => console.log(c.grantId, c.error) });
  release.subscribe({ asyncEnd: (c) => console.log(c.grantId, c.by, c.result) });
  reap.subscribe({ asyncEnd: (c) => console.log(c.staleAfterMs, c.result?.reaped) });
  const lostChannel: LockChannel<LostContext> = diagnostics.channel(CHANNELS.lost);
  // @types/node types a plain channel's listener as taking unknown.
  const onLost = (message: unknown) => {
    const m = message as LostContext;
    console.log(m.grantId, m.resourceId, m.releasedBy, m.detectedBy);
  };
  diagnostics.subscribe(CHANNELS.lost, onLost);
  return () => {
    acquire.unsubscribe(acquireHandlers);
    diagnostics.unsubscribe(CHANNELS.lost, onLost);
    console.log(acquire.start.hasSubscribers, acquire.error.hasSubscribers, lostChannel.hasSubscribers);
  };
}
