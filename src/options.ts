// Every option of the library: what the rest of src/ imports, gathered from src/options/ (its
// README says which module holds what). The public option types reach the package entries from here.
export { DEFAULTS, LIMITS, MAINTENANCE_RESOURCE } from './options/defaults.js';
export { keysOf, OPTION_KEYS } from './options/keys.js';
export {
  permitOptions,
  sharedOptions,
  resolveCallOptions,
  resolveExclusiveOptions,
  resolveManagerOptions,
} from './options/resolve.js';
export type {
  AcquireOptions,
  ExclusiveOptions,
  ForceReleaseOptions,
  HistoryOptions,
  IsolationLevel,
  ListOptions,
  LockManagerOptions,
  PermitOptions,
  ProceduresMode,
  ResolvedAcquireOptions,
  ResolvedExclusiveOptions,
  ResolvedManagerOptions,
  WithGrantOptions,
  WithLockOptions,
} from './options/option-types.js';
export {
  booleanOption,
  envNumber,
  integerOption,
  knexOption,
  optionsObject,
  proceduresOption,
  reapBatchOption,
  retentionOption,
  staleAfterOption,
  textOption,
} from './options/validators.js';
