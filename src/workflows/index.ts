// Every workflow type the tilebreaker worker registers (this module is the worker's workflowsPath). A versioned
// worker pins each run to the build it started on (src/client/versioning.ts, docs/upgrading.md); it is the
// worker's default, not declared here, because a workflow that declares one fails on an unversioned worker.
export { breakerDrillWorkflow } from './drill';
export { breakerEntityWorkflow } from './breaker-entity';
export { mosaicBlockWorkflow, mosaicWorkflow, redriveMosaicWorkflow } from './mosaic';
export { scheduledMosaicWorkflow } from './scheduled-mosaic';
export { seedWorkflow } from './seed';
export { scheduledSeedWorkflow } from './scheduled-seed';
