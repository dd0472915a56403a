import { settleBatch, startRun } from './batch-run';
import { setUpBatch } from './batch-setup';
import type { BatchResume, FetchBatchInput, FetchDeps, TileResult } from './batch-types';
import { runUnits } from './unit-loop';
export { probeBoundMs } from '../guard/probe-bound';
export {
  CURABLE_KINDS,
  sourceBreakerKey,
  type BatchResume,
  type FetchBatchInput,
  type FetchDeps,
  type TileResult,
  type TileStatus,
  type WhenRefused,
} from './batch-types';
export { BEAT_EVERY_MS, PULSE_MS } from './batch-run';
export { CONFIG_ERRORS_TO_STOP } from './unit-loop';

/**
 * Fetches a batch of tiles with the source's concurrency (scaled by the breaker's ramp allowance), validates
 * and stores them, and returns one result per tile, in input order. Heartbeats the results so far; a retried
 * activity resumes from them (and from `resume.resumed`) and never fetches a finished tile again.
 */
export function makeFetchBatch(deps: FetchDeps) {
  return async function fetchTiles(input: FetchBatchInput, resume: BatchResume = {}): Promise<TileResult[]> {
    const run = startRun(await setUpBatch({ deps, input, resume }));
    await runUnits(run);
    return settleBatch(run);
  };
}
