// Every workflow type the tilebreaker worker registers (this module is the worker's workflowsPath).
export { breakerDrillWorkflow } from './drill';
export { breakerEntityWorkflow } from './breaker-entity';
export { mosaicBlockWorkflow, mosaicWorkflow, redriveMosaicWorkflow } from './mosaic';
export { scheduledMosaicWorkflow } from './scheduled-mosaic';
export { seedWorkflow } from './seed';
export { scheduledSeedWorkflow } from './scheduled-seed';
