/**
 * tilebreaker's public API for programs: the pure breaker policy, the guard that code around a protected call
 * uses, the workflow types and their messages, tile sources, and the helpers that connect to Temporal. The
 * CLI (`npx tilebreaker`) is built on the same pieces.
 */
export * as breaker from './breaker';
export { breakerKey, breakerWorkflowId } from './breaker/key';
export { BreakerGuard, type CallOutcome, type GuardDecision, type GuardOptions, type GuardStats } from './activities/guard';
export { createActivities, type Activities } from './activities';
export { breakerDrillWorkflow } from './workflows/drill';
export { drillStatusQuery, type DrillInput, type DrillResult, type DrillStatus, type DrillStep } from './messages/drill';
export { breakerEntityWorkflow } from './workflows/breaker-entity';
export * from './messages/breaker';
export { BREAKER_KEY, BREAKER_STATE, BREAKER_SEARCH_ATTRIBUTES } from './messages/search-attributes';
export { parseSource, parseSourcesFile, sourceSchema, type SourceConfig, type SourceInput } from './sources/schema';
export { tileUrl, getMapUrl, geographicBbox, type TileAddress } from './sources/request-url';
export { loadSource } from './activities/sources-file';
export { connectionConfigFromEnv, type ConnectionConfig } from './client/connection-config';
export { connectClient } from './client/temporal';
export { connectWorker } from './client/worker';
export { createWorker } from './client/worker';
export { startEmbeddedServer, type EmbeddedServer } from './client/embedded-server';
