import {
  ActivityCancellationType,
  ActivityFailure,
  log,
  proxyActivities,
  TimeoutFailure,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { MosaicActivities } from '../messages/activities';
import { metatileBatches, planMetatile } from '../messages/metatile-batches';
import type { BreakerStateName } from '../breaker';
import { runsSelection, toRuns } from '../messages/tile-runs';
import { NO_BUDGET, type PassCarry, type RunBudget } from './mosaic-continue';
import { ProgressTracker } from './mosaic-progress';
import { waitBetweenPasses } from './mosaic-wait';
import {
  selectionIndices,
  selectionSize,
  zeroStatusCounts,
  type AfterDeadline,
  type MosaicBatchInput,
  type MosaicBatchSummary,
  type MosaicPlan,
  type StatusCounts,
  type TileSelection,
  type WhenRefusedMode,
} from '../messages/mosaic-types';

const FETCH_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '2h',
  // A batch heartbeats every second (sent every 1.5 s), whatever it waits for: a lost worker's batch is retried
  // within 6 s, resuming from its checkpoint.
  heartbeatTimeout: '6s',
  // Wait for a cancelled batch to write its journal, so the partial manifest sees the tiles it finished.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  // Tile-level retries happen inside the batch; these are for a lost worker or a failed journal write. A batch's
  // ConfigError is retried too: some are a moment's (a sources file being rewritten, a root's mount hiccup, one
  // worker of the fleet with other roots), and a retry may land on another worker.
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 5 },
  // Batches go through the task queue to whichever worker polls, not eagerly back to the worker that completed
  // the workflow task: with eager dispatch one process ran nearly every batch of a mosaic (29 of 32 with three
  // workers), so extra workers added nothing and one SIGKILL lost every batch in flight.
  allowEagerDispatch: false,
};
const onWorkflowQueue = proxyActivities<MosaicActivities>(FETCH_OPTIONS);

/**
 * Schedules one fetch batch: on the fetch task queue (`<task queue>-fetch`) when the plan names it, otherwise
 * on the workflow's own queue. Each `tilebreaker worker` (or a worker of your own with createFetchWorker)
 * serves the fetch queue with a cap on the batches it runs at once (`--fetch-batches`): batches on one worker
 * share its per-process `concurrency`, so without the cap one worker held two or three of a mosaic's batches
 * while another held none. The planning activity names the fetch queue only when a worker polls it (the
 * server's poller list), so a fleet of workers of your own that serve only the main queue gets every batch
 * there, as before the cap.
 *
 * The poller list lags: the server keeps a poller in it for minutes after its last poll, so a plan may name
 * the queue after its workers have gone (a fleet replaced by workers of your own). A batch there is therefore
 * given `startWithinMs` to start (schedule-to-start timeout, which Temporal does not retry); if no fetch
 * worker took it by then, it runs on the workflow's own queue instead, which every worker serves. A fleet whose
 * fetch slots are all busy for that long loses only the cap for that batch, never the batch.
 */
async function fetchMosaicBatch(input: MosaicBatchInput): Promise<MosaicBatchSummary> {
  const q = input.plan.fetchQueue;
  if (!q) return onWorkflowQueue.fetchMosaicBatch(input);
  try {
    return await proxyActivities<MosaicActivities>({
      ...FETCH_OPTIONS,
      taskQueue: q.taskQueue,
      scheduleToStartTimeout: q.startWithinMs,
    }).fetchMosaicBatch(input);
  } catch (err) {
    if (!(
      err instanceof ActivityFailure &&
      err.cause instanceof TimeoutFailure &&
      err.cause.timeoutType === 'SCHEDULE_TO_START'
    ))
      throw err;
    log.warn('no fetch worker took the batch in time: it runs on the main task queue', {
      batchId: input.batchId,
      fetchTaskQueue: q.taskQueue,
      startWithinMs: q.startWithinMs,
    });
    return onWorkflowQueue.fetchMosaicBatch(input);
  }
}

const WHEN_REFUSED: Record<AfterDeadline, WhenRefusedMode> = { 'fail-fast': 'defer', stale: 'stale', hole: 'hole' };
export interface BlockResult {
  counts: StatusCounts;
  requests: number;
  breakerStates: BreakerStateName[];
  /** The last pass this block ran. */
  lastPass: number;
  /** A batch met a configuration error (its reason): the block started no further batches for the source. */
  configError?: string;
}

/**
 * Records the tiles a run will not request because the source has a configuration error: one record-only
 * batch (no request), so the manifest accounts for each of them as failed with that error.
 */
export async function recordConfigError(
  plan: MosaicPlan,
  tiles: TileSelection,
  pass: number,
  batchId: string,
  reason: string,
  tracker: ProgressTracker,
): Promise<StatusCounts> {
  if (selectionSize(tiles) === 0) return zeroStatusCounts();
  const s = await fetchMosaicBatch({
    plan,
    tiles,
    pass,
    batchId,
    whenRefused: 'defer',
    final: true,
    configError: reason,
  });
  tracker.add(s.counts, []);
  return s.counts;
}

function batches(sel: TileSelection, size: number): TileSelection[] {
  const out: TileSelection[] = [];
  if ('indices' in sel) {
    for (let k = 0; k < sel.indices.length; k += size) out.push({ indices: sel.indices.slice(k, k + size) });
  } else {
    for (let k = 0; k < sel.count; k += size) out.push({ start: sel.start + k, count: Math.min(size, sel.count - k) });
  }
  return out;
}

/**
 * Runs `fn` over `items` with at most `n` in flight (deterministic: workflow promises only). After a failure
 * or a cancellation no new item starts, and every item already started is awaited before the first error
 * is rethrown: a cancelled batch must finish writing its journal before the partial manifest is made.
 * No new item starts either once `stop` says so; returns how many items started.
 */
async function inPool<T>(
  items: T[],
  n: number,
  fn: (item: T, k: number) => Promise<unknown>,
  stop: () => boolean = () => false,
): Promise<number> {
  let next = 0;
  let failure: { err: unknown } | null = null;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length && !failure && !stop()) {
        const k = next++;
        try {
          await fn(items[k]!, k);
        } catch (err) {
          failure ??= { err };
        }
      }
    }),
  );
  if (failure) throw (failure as { err: unknown }).err;
  return next;
}

/** How a block's run goes on: the run's budget, and where the run before it left off. */
export interface BlockRun {
  budget: RunBudget;
  resume?: PassCarry | undefined;
}

/** A block's result, or, when its run's history is full, what the next run carries to go on. */
export type BlockOutcome = { result: BlockResult; carry?: undefined } | { result: BlockResult; carry: PassCarry };

/**
 * Fetches one block of a mosaic's tiles in batches, then handles the breaker's refusals by the plan's
 * fallback policy. `fail-fast`, `stale` and `hole` are settled in the fetch itself (the batch activity
 * dead-letters, serves the stored copy, or leaves a hole). `wait` sleeps on a durable timer until the
 * breaker's retryAfter (bounded by the deadline) and fetches the refused tiles again; once the deadline has
 * passed, one last pass applies the after-deadline fallback. When the run's budget says its history is full
 * (checked after each wait, and before each batch starts), it stops there and returns what the next run
 * needs: the pending tiles (as runs), the pass and the counts.
 */
export async function fetchBlock(
  plan: MosaicPlan,
  sel: TileSelection,
  tag: string,
  basePass: number,
  tracker: ProgressTracker,
  cont: BlockRun = { budget: NO_BUDGET },
): Promise<BlockOutcome> {
  const r = cont.resume;
  const result: BlockResult = r
    ? {
        counts: { ...r.counts },
        requests: r.requests,
        breakerStates: [...r.breakerStates],
        lastPass: r.pass,
        ...(r.configError !== undefined ? { configError: r.configError } : {}),
      }
    : { counts: zeroStatusCounts(), requests: 0, breakerStates: [], lastPass: basePass };
  const deadlinePassed = () => plan.deadlineAt !== null && Date.now() >= plan.deadlineAt;
  const carry = (pending: number[], pass: number, futile: number, fullPass: boolean): BlockOutcome => ({
    result,
    carry: {
      pending: toRuns(pending),
      pass,
      futile,
      fullPass,
      counts: { ...result.counts },
      requests: result.requests,
      breakerStates: [...result.breakerStates],
      ...(result.configError !== undefined ? { configError: result.configError } : {}),
    },
  });
  let pending: TileSelection | null = r ? runsSelection(r.pending) : sel;
  let pass = r?.pass ?? basePass;
  let futile = r?.futile ?? 0;
  let fullPass = r?.fullPass ?? false;
  // Batches started by this run: a run hands over only after doing some work, so a chain always moves on.
  let started = 0;
  while (pending) {
    const final = plan.fallback !== 'wait' || deadlinePassed();
    const whenRefused: WhenRefusedMode =
      plan.fallback === 'wait' ? (final ? WHEN_REFUSED[plan.afterDeadline] : 'defer') : WHEN_REFUSED[plan.fallback];
    const deferred: number[] = [];
    let retryAfterMs: number | null = null;
    // A configuration error: no further batch starts for the source (the rest is recorded failed with it).
    let stopped: string | null = null;
    // A full history: no further batch starts in this run (the next run starts them).
    let handOver = false;
    const stop = () => {
      if (stopped === null && !handOver && started > 0 && cont.budget.full()) handOver = true;
      return stopped !== null || handOver;
    };
    // The breaker's state as the pass's last refusals saw it: what the wait is waiting for. A batch whose probe
    // failed holds both half-open refusals and the open one that followed: the breaker is open now.
    let refusedBy: BreakerStateName | null = null;
    tracker.startFetching();
    const thisPass = pass;
    const run = async (tiles: TileSelection, k: number) => {
      started++;
      const s: MosaicBatchSummary = await fetchMosaicBatch({
        plan,
        tiles,
        pass: thisPass,
        batchId: `p${thisPass}-${tag}-${k}`,
        whenRefused,
        final,
      });
      tracker.add(s.counts, s.breakerStates);
      for (const key of Object.keys(s.counts) as (keyof StatusCounts)[])
        result.counts[key] = (result.counts[key] ?? 0) + (s.counts[key] ?? 0);
      for (const st of s.breakerStates) if (!result.breakerStates.includes(st)) result.breakerStates.push(st);
      result.requests += s.requests;
      deferred.push(...s.deferred);
      if (s.retryAfterMs !== null) retryAfterMs = Math.max(retryAfterMs ?? 0, s.retryAfterMs);
      if (s.configError !== undefined) {
        result.configError ??= s.configError;
        stopped ??= s.configError;
      }
      refusedBy = s.breakerStates.includes('open') ? 'open' : (s.breakerStates.at(-1) ?? refusedBy);
      return s;
    };
    const meta = planMetatile(plan);
    // Batches of whole metatiles: one GetMap per metatile, never split between two batches.
    const all = meta ? metatileBatches(plan.grid, pending, meta, plan.batchSize) : batches(pending, plan.batchSize);
    let notStarted: TileSelection[] = [];
    if (thisPass === basePass || final || fullPass) {
      notStarted = all.slice(await inPool(all, plan.parallelBatches, run, stop));
    } else {
      // A retry pass: one batch first. If the breaker refuses all of it again, the rest would be refused too:
      // keep them deferred and wait again, so a long outage costs one batch per wait, not the whole block.
      const first = await run(all[0]!, 0);
      if (stopped !== null) notStarted = all.slice(1);
      else if (first.deferred.length < selectionSize(all[0]!))
        notStarted = all.slice(
          1 + (await inPool(all.slice(1), plan.parallelBatches, (t, k) => run(t, k + 1).then(() => undefined), stop)),
        );
      else for (const t of all.slice(1)) deferred.push(...selectionIndices(t));
    }
    result.lastPass = pass;
    if (stopped !== null) {
      // Waiting would not fix the source: the unstarted and the deferred tiles end failed with the error.
      const rest = [...notStarted.flatMap(selectionIndices), ...deferred].sort((a, b) => a - b);
      const counts = await recordConfigError(
        plan,
        { indices: rest },
        thisPass,
        `p${thisPass}-${tag}-config-error`,
        stopped,
        tracker,
      );
      for (const key of Object.keys(counts) as (keyof StatusCounts)[])
        result.counts[key] = (result.counts[key] ?? 0) + (counts[key] ?? 0);
      break;
    }
    if (handOver && notStarted.length > 0)
      return carry(
        [...notStarted.flatMap(selectionIndices), ...deferred].sort((a, b) => a - b),
        pass + 1,
        futile,
        true,
      );
    fullPass = false;
    if (deferred.length === 0) break;
    // Only a non-final `wait` pass leaves tiles deferred: wait for the breaker, bounded by the deadline, and
    // longer after each pass that got nothing through.
    futile = deferred.length >= selectionSize(pending) ? futile + 1 : 0;
    await waitBetweenPasses(plan, tracker, {
      futile,
      told: retryAfterMs,
      state: refusedBy,
    });
    deferred.sort((a, b) => a - b);
    if (cont.budget.full()) return carry(deferred, pass + 1, futile, false);
    pending = { indices: deferred };
    pass++;
  }
  return { result };
}
