import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  executeChild,
  isCancellation,
  log,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { MosaicActivities } from '../messages/activities';
import { fetchBlock, recordConfigError, type BlockResult } from './mosaic-block';
import { ProgressTracker } from './mosaic-progress';
import { planBreakerKey } from './mosaic-wait';
import { progressQuery } from '../messages/mosaic';
import { MosaicPublication } from './mosaic-publication';
import { metatileBlocks, planMetatile } from '../messages/metatile-batches';
import { checkPlan, checkSelection } from '../messages/plan-check';
import {
  DEFAULT_REDRIVE_WAIT_MS,
  selectionSize,
  type MosaicPlan,
  type MosaicRequest,
  type MosaicResult,
  type RedriveSources,
  type TileSelection,
} from '../messages/mosaic-types';
import { checkRuns, concatRuns, runsSelection, selectionRuns } from '../messages/tile-runs';
import {
  continueRun,
  runBudget,
  type FetchCarry,
  type PassCarry,
  type ProgressCarry,
  type RunBudget,
} from './mosaic-continue';

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
  /** Where the run before this one left off (it continued as new): the block goes on from there. */
  resume?: { pass: PassCarry; progress: ProgressCarry };
}

/**
 * One block of a large mosaic, as a child workflow: its history holds only this block's batches. A long wait
 * continues as new (the parent's result follows the chain to its last run).
 */
export async function mosaicBlockWorkflow(input: MosaicBlockInput): Promise<BlockResult> {
  // Anyone who can start workflows can start a block with a plan of their own: checked before it is looped over.
  try {
    checkPlan(input.plan, 'mosaic block: plan');
    checkSelection(input.tiles, input.plan, input.plan.blockTiles, 'mosaic block: tiles');
    if (input.resume)
      checkRuns(
        input.resume.pass.pending,
        input.plan.total,
        input.plan.blockTiles,
        'mosaic block: resume.pass.pending',
      );
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'ConfigError');
  }
  const tracker = new ProgressTracker(selectionSize(input.tiles));
  setHandler(progressQuery, () => tracker.progress);
  if (input.resume) tracker.restore(input.resume.progress);
  const budget = runBudget(input.plan);
  const out = await fetchBlock(input.plan, input.tiles, input.tag, input.basePass, tracker, {
    budget,
    resume: input.resume?.pass,
  });
  if (out.carry)
    return continueRun<typeof mosaicBlockWorkflow>({
      ...input,
      resume: { pass: out.carry, progress: tracker.carry() },
    });
  tracker.progress.phase = 'done';
  return out.result;
}

/**
 * Fetches a selection of the plan's tiles: inline when it fits one block (a small job's whole history is one
 * workflow), otherwise one child workflow per block, one block at a time, so every history stays bounded
 * and the job's concurrency is the same whatever its size. Returns null when every tile is settled, or, when
 * this run's history is full, where the next run goes on (`resume`, what a run before this one returned).
 */
async function fetchAll(
  plan: MosaicPlan,
  sel: TileSelection,
  basePass: number,
  tracker: ProgressTracker,
  budget: RunBudget,
  resume?: FetchCarry,
): Promise<FetchCarry | null> {
  if (resume ? 'inline' in resume : selectionSize(sel) <= plan.blockTiles) {
    const inline = resume && 'inline' in resume ? resume.inline : undefined;
    const out = await fetchBlock(plan, sel, 'b0', basePass, tracker, { budget, resume: inline });
    return out.carry ? { inline: out.carry } : null;
  }
  const carried = resume && 'blocks' in resume ? resume.blocks : undefined;
  const rest = carried ? runsSelection(carried.remaining) : sel;
  const indices = 'indices' in rest ? rest.indices : null;
  const count = selectionSize(rest);
  const { workflowId } = workflowInfo();
  // After a block met a configuration error, later blocks are recorded failed with it, not requested.
  let configError: string | null = carried?.configError ?? null;
  const blocks: TileSelection[] = [];
  const meta = planMetatile(plan);
  // Blocks end on metatile row bands, so no GetMap is split between two blocks.
  if (meta) blocks.push(...metatileBlocks(plan.grid, rest, meta[1], plan.blockTiles));
  else {
    for (let k = 0; k < count; k += plan.blockTiles) {
      const n = Math.min(plan.blockTiles, count - k);
      blocks.push(
        indices ? { indices: indices.slice(k, k + n) } : { start: (rest as { start: number }).start + k, count: n },
      );
    }
  }
  const first = carried?.nextBlock ?? 0;
  for (const [j, tiles] of blocks.entries()) {
    const b = first + j;
    // A full history hands the blocks not yet run to the next run (a block's own history is its child's).
    if (j > 0 && budget.full())
      return { blocks: { remaining: concatRuns(blocks.slice(j).map(selectionRuns)), nextBlock: b, configError } };
    if (configError !== null) {
      tracker.startFetching();
      await recordConfigError(plan, tiles, basePass, `p${basePass}-b${b}-config-error`, configError, tracker);
      continue;
    }
    const childId = `${workflowId}/p${basePass}-block-${b}`;
    tracker.progress.runningBlocks = [childId];
    tracker.startFetching();
    const r = await executeChild(mosaicBlockWorkflow, {
      workflowId: childId,
      args: [{ plan, tiles, tag: `b${b}`, basePass }],
    });
    tracker.add(r.counts, r.breakerStates);
    tracker.progress.runningBlocks = [];
    if (r.configError !== undefined) configError = r.configError;
  }
  return null;
}

/** What a mosaic run hands to the next when its history is full: the plan (the journals are named in it, and
 * planning again would clear them), where the fetching stands, and the progress figures. */
export interface MosaicCarry {
  plan: MosaicPlan;
  next: FetchCarry;
  progress: ProgressCarry;
}

/** A carried plan and position, checked as a block checks its input (anyone may start a run with one). */
function checkCarry(plan: MosaicPlan, next: FetchCarry, subject: string): void {
  try {
    checkPlan(plan, `${subject}: plan`);
    if ('inline' in next)
      checkRuns(next.inline.pending, plan.total, plan.blockTiles, `${subject}: next.inline.pending`);
    else checkRuns(next.blocks.remaining, plan.total, plan.total, `${subject}: next.blocks.remaining`);
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'ConfigError');
  }
}

/**
 * Builds a mosaic end to end: plan (every validation before any fetch), fetch through the fleet-wide breaker
 * with the plan's fallback policy, then stitch, georeference, mask and manifest. Cancelled or failed after
 * planning, it still writes a partial manifest accounting for every tile before it ends.
 */
export async function mosaicWorkflow(request: MosaicRequest, carried?: MosaicCarry): Promise<MosaicResult> {
  let tracker = new ProgressTracker(0);
  setHandler(progressQuery, () => tracker.progress);
  if (carried) checkCarry(carried.plan, carried.next, 'mosaic carried');
  const pub = await MosaicPublication.open({
    output: String(request.output),
    source: request.sourceName ?? 'inline',
    zoom: request.zoom,
  });
  let plan: MosaicPlan;
  if (carried) plan = carried.plan;
  else {
    try {
      plan = await planMosaic(request, workflowInfo().runId);
    } catch (err) {
      pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
      throw err;
    }
  }
  tracker = new ProgressTracker(plan.total);
  tracker.progress.breakerKeys = plan.breaker ? [keyOf(plan)] : [];
  if (carried) tracker.restore(carried.progress);
  tracker.onAdd = (p) => pub.progress(p);
  pub.progress(tracker.progress);
  const budget = runBudget(plan);
  let next: FetchCarry | null;
  try {
    next = await fetchAll(plan, { start: 0, count: plan.total }, 0, tracker, budget, carried?.next);
    stopIfCancelled();
    if (!next) tracker.progress.phase = 'assembling';
  } catch (err) {
    await writePartial(plan, tracker, err);
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  if (next) return continueRun<typeof mosaicWorkflow>(request, { plan, next, progress: tracker.carry() });
  // Every tile is fetched: a cancel now would only race a partial assembly against this one.
  const result = await CancellationScope.nonCancellable(() =>
    assembleMosaic({ plan, partial: false, workflowId: workflowInfo().workflowId }),
  ).catch((err: unknown) => {
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
 * manifest.
 */
function stopIfCancelled(): void {
  if (CancellationScope.current().consideredCancelled)
    throw new CancelledFailure('cancelled while the last batches were finishing');
}

async function writePartial(plan: MosaicPlan, tracker: ProgressTracker, err: unknown): Promise<void> {
  const cancelled = isCancellation(err);
  tracker.progress.phase = cancelled ? 'cancelled' : 'failed';
  const stoppedBecause = cancelled ? 'cancelled' : `failed: ${causeChain(err)}`;
  // Runs even though the workflow is cancelled; a failure here is logged, and must not hide the original error.
  await CancellationScope.nonCancellable(() =>
    assembleMosaic({ plan, partial: true, stoppedBecause, workflowId: workflowInfo().workflowId }).catch(
      (e: unknown) => {
        log.error('the partial manifest could not be written', { error: causeChain(e), stoppedBecause });
      },
    ),
  );
}

/** "Activity task failed: <the activity's own message>": the messages of an error and its causes. */
function causeChain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 5; e = (e as { cause?: unknown }).cause)
    parts.push(e.message);
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
  /** Fetch the tiles a mirror served from the source again as well (a tile the source still refuses keeps its mirror's copy). */
  replaceMirrors?: boolean;
}

/**
 * Re-drives a mosaic's dead-lettered tiles: fetches only those tiles with the `wait` fallback, so tiles the
 * breaker refuses (open, or half-open while one probe tests the server) wait on durable timers for it to
 * close, up to `waitForMs`; tiles still refused then stay dead-lettered. Then it rebuilds the mosaic and its
 * manifest.
 */
export async function redriveMosaicWorkflow(input: RedriveInput, carried?: RedriveCarry): Promise<MosaicResult> {
  let tracker = new ProgressTracker(0);
  setHandler(progressQuery, () => tracker.progress);
  if (carried) checkCarry(carried.plan, carried.next, 'redrive carried');
  const pub = await MosaicPublication.open({ output: String(input.manifest) });
  const waitForMs = input.waitForMs ?? DEFAULT_REDRIVE_WAIT_MS;
  if (!(Number.isFinite(waitForMs) && waitForMs > 0)) {
    throw ApplicationFailure.nonRetryable(
      `redrive: waitForMs must be a positive number of ms (got ${JSON.stringify(input.waitForMs)})`,
      'ConfigError',
    );
  }
  const deadlineAt = carried?.deadlineAt ?? Date.now() + waitForMs;
  // The source as the plan froze it, or as the sources file says now (a fixed URL or credential).
  let letters: Awaited<ReturnType<typeof loadDeadLetters>>;
  if (carried) letters = { plan: carried.plan, indices: [], notBefore: 0, nextPass: carried.basePass };
  else {
    try {
      letters = input.replaceMirrors
        ? await loadDeadLetters(input.manifest, input.sources ?? null, { replaceMirrors: true })
        : input.sources
          ? await loadDeadLetters(input.manifest, input.sources)
          : await loadDeadLetters(input.manifest);
    } catch (err) {
      pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
      throw err;
    }
  }
  // Waiting is the breaker's business now: the first pass finds it open (refused at once, no request) or
  // half-open, and the wait follows its retryAfter, not the old journals' notBefore.
  const plan: MosaicPlan = { ...letters.plan, fallback: 'wait', afterDeadline: 'fail-fast', deadlineAt };
  const total = carried?.total ?? letters.indices.length;
  tracker = new ProgressTracker(total);
  tracker.progress.breakerKeys = plan.breaker ? [keyOf(plan)] : [];
  if (carried) tracker.restore(carried.progress);
  tracker.onAdd = (p) => pub.progress(p);
  pub.relabel({ source: letters.plan.sourceName, zoom: letters.plan.grid.z });
  pub.progress(tracker.progress);
  const budget = runBudget(letters.plan);
  let next: FetchCarry | null = null;
  try {
    if (carried || letters.indices.length > 0)
      next = await fetchAll(plan, { indices: letters.indices }, letters.nextPass, tracker, budget, carried?.next);
    stopIfCancelled();
    if (!next) tracker.progress.phase = 'assembling';
  } catch (err) {
    await writePartial(letters.plan, tracker, err);
    pub.stopped(isCancellation(err) ? 'cancelled' : 'failed', tracker.progress);
    throw err;
  }
  if (next)
    return continueRun<typeof redriveMosaicWorkflow>(input, {
      plan: letters.plan,
      deadlineAt,
      basePass: letters.nextPass,
      total,
      next,
      progress: tracker.carry(),
    });
  const result = await CancellationScope.nonCancellable(() =>
    assembleMosaic({ plan: letters.plan, partial: false, workflowId: workflowInfo().workflowId }),
  ).catch((err: unknown) => {
    pub.stopped('failed', tracker.progress);
    throw err;
  });
  tracker.progress.phase = 'done';
  pub.finished(result);
  return result;
}

/** What a re-drive run hands to the next: the mosaic's plan, the wait's deadline, where the fetching stands. */
export interface RedriveCarry {
  plan: MosaicPlan;
  deadlineAt: number;
  basePass: number;
  /** The dead letters the re-drive began with (the progress query's total). */
  total: number;
  next: FetchCarry;
  progress: ProgressCarry;
}
