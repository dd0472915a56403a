/**
 * Operator-side access to the fleet's breakers (the `tilebreaker breaker ...` commands): list the running
 * entities, show one, and force one open or closed or reset it. Everything here goes through a plain
 * @temporalio/client Client: no worker is needed, except that the entity's own workers must be running for
 * queries (status, transitions) to be answered.
 *
 * One module per concern, gathered here: keys (breaker-keys.ts), errors (breaker-errors.ts), listing
 * (breaker-list.ts), one breaker's status and log (breaker-show.ts), admin actions and configuration
 * (breaker-admin.ts, sent and read back by breaker-admin-signal.ts) and who sends them (breaker-actor.ts).
 */
export { adminSender, defaultActor } from './breaker-actor';
export {
  adminBreaker,
  configureBreaker,
  type AdminOptions,
  type AdminResult,
  type BreakerAdminAction,
  type ConfigureResult,
} from './breaker-admin';
export { DEFAULT_CONFIRM_TIMEOUT_MS } from './breaker-admin-signal';
export { AdminNotConfirmedError, BreakerNotFoundError, BreakerNotRunningError } from './breaker-errors';
export { BREAKER_WORKFLOW_TYPE, resolveBreakerKey, type ResolvedKey } from './breaker-keys';
export { BREAKER_STATES, listBreakers, statesMeant, type ListedBreaker, type ListResult } from './breaker-list';
export { breakerStatus, breakerTransitions, showBreaker, type ShownBreaker } from './breaker-show';
