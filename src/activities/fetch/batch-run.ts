/** A running batch: its loops' shared state, its heartbeats, and its results once the loops are done. */
import { ApplicationFailure } from '@temporalio/common';
import type { TileResult } from './batch-types';
import type { Batch } from './batch-setup';

/**
 * How often a batch records its results as heartbeat details while tiles finish. The worker sends the latest
 * at most every 1.5 s (`maxHeartbeatThrottleInterval`, src/client/worker.ts): a batch resumed from heartbeats
 * alone loses at most 2 s of finished tiles. A mosaic's batch also checkpoints each finished request outside
 * Temporal (`onFinished`), and loses none.
 */
export const BEAT_EVERY_MS = 500;
/** How often a batch heartbeats while no tile finishes: well within the 6 s heartbeat timeout (mosaic-block.ts). */
export const PULSE_MS = 1_000;

/** A batch while its loops run. */
export interface BatchRun extends Batch {
  /** The next unit a loop takes. */
  next: number;
  /** When the last heartbeat went out (Date.now()). */
  lastBeat: number;
  /** The breaker's ramp after a recovery: only this share of the source's concurrency may be in flight. */
  allowance: number;
  /** Requests in flight. */
  active: number;
  /** Loops waiting for a request to answer. */
  waiters: (() => void)[];
}

/** A batch set up, ready for its loops. */
export function startRun(batch: Batch): BatchRun {
  return { ...batch, next: 0, lastBeat: 0, allowance: 1, active: 0, waiters: [] };
}

/** The batch starts no further request: cancelled, or its attempt lost its lease. */
export function halted({ ctx, lease }: BatchRun): boolean {
  return ctx?.cancellationSignal.aborted === true || lease?.lost() != null;
}

/** Records the results so far as heartbeat details (at most every BEAT_EVERY_MS unless forced). */
export function beat(run: BatchRun, force = false): void {
  const { ctx, lease, results } = run;
  // At its own pace (a third of the heartbeat timeout).
  lease?.beat({ results });
  if (!ctx || (!force && Date.now() - run.lastBeat < BEAT_EVERY_MS)) return;
  run.lastBeat = Date.now();
  ctx.heartbeat({ results });
}

/**
 * The batch's results once its loops are done, one per tile (the unfinished ones deferred); throws when the
 * attempt lost its lease meanwhile.
 */
export function settleBatch(run: BatchRun): TileResult[] {
  beat(run, true);
  const lost = run.lease?.lost();
  if (lost) {
    // Its finished tiles are in the heartbeat and the caller's checkpoint; the attempt that has the batch now
    // resumes from them. Retryable: should the server still know this attempt, its retry does the rest.
    throw ApplicationFailure.retryable(`fetch batch stopped starting requests: ${lost}`, 'HeartbeatLost');
  }
  // Cancelled: unfinished tiles are accounted for too.
  return run.results.map(
    (r, i) =>
      r ?? { ...run.input.tiles[i]!, status: 'deferred', reason: 'activity cancelled before this tile', attempts: 0 },
  );
}
