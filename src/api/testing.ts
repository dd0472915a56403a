/**
 * `tilebreaker/testing`: for tests. Replay recorded histories against tilebreaker's workflow code (so a
 * workflow change that runs in flight could not continue fails a test), record them from a server, and
 * start a local dev server with tilebreaker's search attributes registered.
 */
export {
  fetchHistory,
  loadHistoryFile,
  recordHistory,
  replayHistories,
  replayHistoryFile,
  saveHistory,
  type History,
  type RecordedHistory,
  type ReplayOptions,
} from '../client/histories';
export { workflowsPath } from '../client/worker';
export { startEmbeddedServer, type EmbeddedServer } from '../client/embedded-server';
export type { ReplayResult } from '@temporalio/worker';
