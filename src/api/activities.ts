/**
 * `tilebreaker/activities`: the worker side. tilebreaker's activities to register in a worker of your own,
 * beside your activities (with `tilebreaker/workflows` in its workflowsPath); the breaker guard, for code of
 * your own around a protected call; and tilebreaker's own worker, every workflow and activity on one task queue.
 */
export { createActivities, createActivityRuntime, type Activities, type ActivityDeps } from '../activities';
export {
  BreakerGuard,
  BreakerOpenedError,
  BreakerRefusedError,
  ChainExhaustedError,
  classifyCall,
  ContractBreachError,
  processIdentity,
  witnessIdentity,
  type CallOutcome,
  type CallVerdict,
  type ChainOptions,
  type ChainResult,
  type GuardDecision,
  type GuardOptions,
  type GuardStats,
  type PassedOver,
  type Provider,
  type RunCall,
  type RunOptions,
  type Settled,
  type StallOptions,
} from '../activities/guard';
export { OUTPUT_DIR_ENV, rootsFromEnv, SOURCES_DIR_ENV, type WorkerRoots } from '../activities/confine/roots';
export { loadSource, type SourceReadOptions } from '../activities/sources-file';
export {
  connectWorker,
  createFetchWorker,
  createWorker,
  DEFAULT_FETCH_BATCHES,
  workflowsPath,
  type CreateFetchWorkerOptions,
  type CreateWorkerOptions,
} from '../client/worker';
export { DEFAULT_FETCH_QUEUE_START_WITHIN_MS } from '../activities/mosaic/fetch-queue';
export {
  defaultBuildId,
  defaultDeploymentName,
  deploymentOptions,
  promoteWhenPolling,
  type PromoteOutcome,
  type WorkerVersioning,
} from '../client/versioning';
