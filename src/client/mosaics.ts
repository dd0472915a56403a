/**
 * Starting and following mosaics from a client, gathered here: a start (mosaic-start.ts), a run's status, watch,
 * cancel and exit code (mosaic-status.ts), and a re-drive of its dead letters (mosaic-redrive.ts).
 */
export { mosaicWorkflowId } from './mosaic-names';
export { startRedrive } from './mosaic-redrive';
export { MosaicAlreadyRunningError, resolveRequestPaths, startMosaic, type StartMosaicOptions } from './mosaic-start';
export {
  cancelMosaic,
  EXIT,
  exitCodeFor,
  liveCounts,
  mosaicStatus,
  watchMosaic,
  type MosaicStatus,
} from './mosaic-status';
