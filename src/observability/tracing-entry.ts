// `mysql-rwlock/tracing`: the names of the library's diagnostics channels and the context object
// each publishes. A subpath of its own: an application that only takes locks never names them.
export {
  CHANNELS,
  type AcquireContext,
  type FenceContext,
  type ReleaseContext,
  type ReapContext,
  type LostContext,
} from '../contract/channels.js';
export type { LockChannel, LockTracingChannel, LockTracingHandlers } from '../contract/channels.js';
