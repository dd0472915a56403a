import { ApplicationFailure, CancellationScope, CancelledFailure, executeChild, isCancellation, log, patched, proxyActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { MosaicActivities } from '../messages/activities';
import { CONFIG_ERROR_PATCH, fetchBlock, METATILE_BATCHES_PATCH, planBreakerKey, ProgressTracker, recordConfigError, type BlockResult } from './mosaic-block';
import { progressQuery } from '../messages/mosaic';
import { MosaicPublication } from './mosaic-publication';
import { metatileBlocks, planMetatile } from '../messages/metatile-batches';
import { checkPlan, checkSelection } from '../messages/plan-check';
import { DEFAULT_REDRIVE_WAIT_MS, selectionSize, type MosaicPlan, type MosaicRequest, type MosaicResult, type RedriveSources, type TileSelection } from '../messages/mosaic-types';

const { planMosaic } = proxyActivities<MosaicActivities>({
  startToCloseTimeout: '1m',
  // A bad request or sources file does not get better on a retry.
  retry: { maximumAttempts: 3, nonRetryableErrorTypes: ['ConfigError'] },
});
const { assembleMosaic, loadDeadLetters } = proxyActivities<MosaicActivities>({
  startToCloseTimeout: '4h',
  heartbeatTimeout: '2m',
  // A tile of the wrong size or a grid too large for an output format will not stitch on a retry either.
  retry: { initialInterval: '5s', maximumAttempts: 3, nonRetryableErrorTypes: ['ConfigError', 'StitchInputError'] },
});

const keyOf = planBreakerKey;

export interface MosaicBlockInput {
  plan: MosaicPlan;
  tiles: TileSelection;
  tag: string;
  basePass: number;
}

/** One block of a large mosaic, as a child workflow: its history holds only this block's batches. */
export async function mosaicBlockWorkflow(input: MosaicBlockInput): Promise<BlockResult> {
  // Anyone who can start workflows can start a block with a plan of their own: checked before it is looped over.
  try {
    checkPlan(input.plan, 'mosaic block: plan');
    checkSelection(input.tiles, input.plan, input.plan.blockTiles, 'mosaic block: tiles');
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'ConfigError');
  }
  const tracker = new ProgressTracker(selectionSize(input.tiles));
  setHandler(progressQuery, () => tracker.progress);
  const result = await fetchBlock(input.plan, input.tiles, input.tag, input.basePass, tracker);
  tracker.progress.phase = 'done';
  return result;
}

/**
 * Fetches a selection of the plan's tiles: inline when it fits one block (a small job's whole history is one
 * workflow), otherwise one child workflow per block, one block at a time, so every history stays bounded
 * and the job's concurrency is the same whatever its size.
 */
async function fetchAll(plan: MosaicPlan, sel: TileSelection, basePass: number, tracker: ProgressTracker): Promise<void> {
  const indices = 'indices' in sel ? sel.indices : null;
  const count = selectionSize(sel);
  if (count <= plan.blockTiles) {
    await fetchBlock(plan, sel, 'b0', basePass, tracker);
    return;
  }
  const { workflowId } = workflowInfo();
  // After a block met a configuration error, later blocks are recorded failed with it, not requested.
  let configError: string | null = null;
  const blocks: TileSelection[] = [];
  const meta = planMetatile(plan);
  // Blocks end on metatile row bands, so no GetMap is split between two blocks (runs before: row order).
  if (meta && patched(METATILE_BATCHES_PATCH)) blocks.push(...metatileBlocks(plan.grid, sel, meta[1], plan.blockTiles));
  else {
    for (let k = 0; k < count; k += plan.blockTiles) {
      const n = Math.min(plan.blockTiles, count - k);
      blocks.push(indices ? { indices: indices.slice(k, k + n) } : { start: (sel as { start: number }).start + k, count: n });
    }
  }
  for (const [b, tiles] of blocks.entries()) {
    if (configError !== null) {
      tracker.startFetching();
      await recordConfigError(plan, tiles, basePass, `p${basePass}-b${b}-config-error`, configError, tracker);
      continue;
    }
    const childId = `${workflowId}/p${basePass}-block-${b}`;
    tracker.progress.runningBlocks = [childId];
    tracker.startFetching();
    const r = await executeChild(mosaicBlockWorkflow, { workflowId: childId, args: [{ plan, tiles, tag: `b${b}`, basePass }] });
    tracker.add(r.counts, r.breakerStates);
    tracker.progress.runningBlocks = [];
    if (r.configError !== undefined && patched(CONFIG_ERROR_PATCH)) configError = r.configError;
  }
}

/**
 * Builds a mosaic end to end: plan (every validation before any fetch), fetch through the fleet-wide breaker
 * with the plan's fallback policy, then stitch, georeference, mask and manifest. Cancelled or failed after
 * planning, it still writes a partial manifest accounting for every tile before it ends.
 */
export async function mosaicWorkflow(request: MosaicRequest): Promise<MosaicResult> {
  let tracker = new ProgressTracker(0);
  setHandler(progressQuery, () => tracker.progress);
  const pub = await MosaicPublication.open({ output: String(request.output), source: request.sourceName ?? 'inline', zoom: request.zoom });
  let plan: MosaicPlan;
  try {
    plan = await planMosaic(request, workflowInfo().runId);
  } catch (err) {
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  tracker = new ProgressTracker(plan.total);
  tracker.progress.breakerKeys = plan.breaker ? [keyOf(plan)] : [];
  tracker.onAdd = (p) => pub.progress(p);
  pub.progress(tracker.progress);
  try {
    await fetchAll(plan, { start: 0, count: plan.total }, 0, tracker);
    stopIfCancelled();
    tracker.progress.phase = 'assembling';
  } catch (err) {
    await writePartial(plan, tracker, err);
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  // Every tile is fetched: a cancel now would only race a partial assembly against this one.
  const result = await CancellationScope.nonCancellable(() => assembleMosaic({ plan, partial: false, workflowId: workflowInfo().workflowId })).catch((err: unknown) => {
    pub.stopped('failed', tracker.progress);
    throw err;
  });
  tracker.progress.phase = 'done';
  pub.finished(result);
  return result;
}

/**
 * Cancel means cancel, whatever the mosaic's size: a cancel that arrived while the last batches were finishing
 * (they completed before their heartbeats carried it) still stops the run before assembly, with a partial
 * manifest. Runs recorded before this rule went on to assemble.
 */
function stopIfCancelled(): void {
  if (CancellationScope.current().consideredCancelled && patched('cancel-means-cancel')) throw new CancelledFailure('cancelled while the last batches were finishing');
}

async function writePartial(plan: MosaicPlan, tracker: ProgressTracker, err: unknown): Promise<void> {
  const cancelled = isCancellation(err);
  tracker.progress.phase = cancelled ? 'cancelled' : 'failed';
  const stoppedBecause = cancelled ? 'cancelled' : `failed: ${causeChain(err)}`;
  // Runs even though the workflow is cancelled; a failure here is logged, and must not hide the original error.
  await CancellationScope.nonCancellable(() =>
    assembleMosaic({ plan, partial: true, stoppedBecause, workflowId: workflowInfo().workflowId }).catch((e: unknown) => {
      log.error('the partial manifest could not be written', { error: causeChain(e), stoppedBecause });
    }),
  );
}

/** "Activity task failed: <the activity's own message>": the messages of an error and its causes. */
function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 5; e = (e as { cause?: unknown }).cause) parts.push(e.message);
  return parts.join(': ');
}

export interface RedriveInput {
  /** The mosaic's manifest (or its output .tif). */
  manifest: string;
  /** Read the source from this sources file (on the worker) instead of the one frozen in the plan. */
  sources?: RedriveSources;
  /**
   * How long (ms, from the start) to wait for the breaker to let the tiles through (default
   * DEFAULT_REDRIVE_WAIT_MS); after it, tiles still refused are dead-lettered again.
   */
  waitForMs?: number;
}

/**
 * Re-drives a mosaic's dead-lettered tiles: fetches only those tiles with the `wait` fallback, so tiles the
 * breaker refuses (open, or half-open while one probe tests the server) wait on durable timers for it to
 * close, up to `waitForMs`; tiles still refused then stay dead-lettered. Then it rebuilds the mosaic and its
 * manifest. (Runs from before 'redrive-waits' slept until the dead letters' retryAfter and fetched them
 * fail-fast: started while the breaker was half-open, such a run got one tile through.)
 */
export async function redriveMosaicWorkflow(input: RedriveInput): Promise<MosaicResult> {
  let tracker = new ProgressTracker(0);
  setHandler(progressQuery, () => tracker.progress);
  const waits = patched('redrive-waits');
  const pub = await MosaicPublication.open({ output: String(input.manifest) });
  const waitForMs = input.waitForMs ?? DEFAULT_REDRIVE_WAIT_MS;
  if (waits && !(Number.isFinite(waitForMs) && waitForMs > 0)) {
    throw ApplicationFailure.nonRetryable(`redrive: waitForMs must be a positive number of ms (got ${JSON.stringify(input.waitForMs)})`, 'ConfigError');
  }
  const deadlineAt = Date.now() + waitForMs;
  // The source as the plan froze it, or as the sources file says now (a fixed URL or credential).
  let letters: Awaited<ReturnType<typeof loadDeadLetters>>;
  try {
    letters = input.sources ? await loadDeadLetters(input.manifest, input.sources) : await loadDeadLetters(input.manifest);
  } catch (err) {
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  // Waiting is the breaker's business now: the first pass finds it open (refused at once, no request) or
  // half-open, and the wait follows its retryAfter, not the old journals' notBefore.
  const plan: MosaicPlan = waits ? { ...letters.plan, fallback: 'wait', afterDeadline: 'fail-fast', deadlineAt } : { ...letters.plan, fallback: 'fail-fast' };
  tracker = new ProgressTracker(letters.indices.length);
  tracker.progress.breakerKeys = plan.breaker ? [keyOf(plan)] : [];
  tracker.onAdd = (p) => pub.progress(p);
  pub.relabel({ source: letters.plan.sourceName, zoom: letters.plan.grid.z });
  pub.progress(tracker.progress);
  const waitMs = waits ? 0 : letters.notBefore - Date.now();
  if (waitMs > 0) {
    tracker.progress.phase = 'waiting';
    tracker.progress.waitingUntil = letters.notBefore;
    await sleep(waitMs);
  }
  try {
    if (letters.indices.length > 0) await fetchAll(plan, { indices: letters.indices }, letters.nextPass, tracker);
    stopIfCancelled();
    tracker.progress.phase = 'assembling';
  } catch (err) {
    await writePartial(letters.plan, tracker, err);
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  const result = await CancellationScope.nonCancellable(() => assembleMosaic({ plan: letters.plan, partial: false, workflowId: workflowInfo().workflowId })).catch((err: unknown) => {
    pub.stopped('failed', tracker.progress);
    throw err;
  });
  tracker.progress.phase = 'done';
  pub.finished(result);
  return result;
}
