/**
 * tilebreaker's public API for programs: the pure breaker policy, the workflow types and their inputs,
 * and the helpers that connect to Temporal. The CLI (`npx tilebreaker`) is built on the same pieces.
 */
export * as breaker from './breaker';
export { breakerDrillWorkflow, drillStatusQuery } from './workflows/drill';
export type { DrillInput, DrillResult, DrillStatus, DrillStep } from './workflows/drill';
export { BREAKER_KEY, BREAKER_STATE, BREAKER_SEARCH_ATTRIBUTES } from './workflows/search-attributes';
export { connectionConfigFromEnv, type ConnectionConfig } from './client/connection-config';
export { connectClient, connectWorker } from './client/temporal';
export { createWorker } from './client/worker';
export { startEmbeddedServer, type EmbeddedServer } from './client/embedded-server';
