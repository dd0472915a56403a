import { CancelledFailure } from '@temporalio/common';
import type { BreakerStateName } from '../../breaker';
import {
  selectionIndices,
  zeroStatusCounts,
  type ManifestStatus,
  type ManifestTile,
  type MosaicBatchInput,
  type MosaicBatchSummary,
  type StatusCounts,
} from '../../messages/mosaic-types';
import { CURABLE_KINDS, makeFetchBatch, sourceBreakerKey, type FetchDeps, type TileResult } from '../fetch/fetch-batch';
import { writeJournal } from './journal';
import { openCheckpoint as openBatchCheckpoint, type Checkpoint } from './batch-checkpoint';
import { isObjectUrl } from '../storage/location';
import { tileOf } from './plan';
import { coveredTiles } from './plan-coverage';
import { activityContext } from '../activity-context';
import type { Context } from '@temporalio/activity';
import { makeDirs } from '../confine/confine';
import { confinePlan } from '../confine/plan-paths';
import { checkSelection } from '../../messages/plan-check';
import { fallbackTier } from '../metrics/mosaic-metrics';
import type { FallbackTier } from '../../messages/metrics';
import type { SourceConfig } from '../../sources/schema';
import type { TileAddress } from '../../sources/request-url';

/**
 * The manifest status of a fetch result. A tile refused by the breaker (or paced by a 429) that the run will
 * not wait for is dead-lettered, and so is one that failed in a way a later attempt may cure; a permanent
 * failure or a configuration error is failed.
 */
export function manifestStatus(r: TileResult): ManifestStatus {
  switch (r.status) {
    case 'ok':
    case 'stale':
    case 'hole':
      return r.status;
    case 'deferred':
      return 'dead-lettered';
    case 'failed':
      return !r.configError && r.kind !== undefined && CURABLE_KINDS.has(r.kind) ? 'dead-lettered' : 'failed';
  }
}

/**
 * The mosaic's fetch activity: one batch of the plan's tiles through the pipeline's fetch (breaker, retries,
 * validation, tile store), its per-tile records written to the mosaic's journal, and a summary small enough
 * for the workflow's history. Tiles still deferred in a non-final pass are recorded as dead-lettered (what
 * they are if the run stops here) and returned for the workflow to wait for.
 */
export function makeMosaicBatch(deps: FetchDeps) {
  const fetchTiles = makeFetchBatch(deps);
  return async function fetchMosaicBatch(input: MosaicBatchInput): Promise<MosaicBatchSummary> {
    const plan = await confinePlan(input.plan, deps.roots, 'mosaic batch');
    if (input.configError !== undefined) return recordConfigError(plan, input, deps);
    const selection = deps.roots
      ? checkSelection(input.tiles, plan, plan.batchSize, 'mosaic batch: tiles')
      : input.tiles;
    // Tiles outside the request's coverage are recorded so, with no request.
    const { inside: indices, outside } = await splitByCoverage(plan, selectionIndices(selection), input.pass);
    const addresses = indices.map((i) => tileOf(plan.grid, i));
    const ctx = activityContext();
    const results = await fetchWithCheckpoint({ fetchTiles, plan, input, addresses, ctx });
    if (ctx?.cancellationSignal.aborted && !ctx.cancellationDetails?.cancelRequested) {
      // Not a cancel of the mosaic: a heartbeat timeout (another attempt has the batch now), a worker
      // shutting down, a reset. Write no journal: the retry resumes from the checkpoint and writes it.
      throw ctx.cancellationSignal.reason ?? new Error('fetch batch stopped before it finished');
    }
    const tally = tallyResults({ results, indices, plan, input, outside: outside.length });
    // The checkpoint stays until the assembly: if this completion never reaches Temporal, the retry rewrites
    // this journal from it without a request.
    await writeJournal(plan.journalDir, {
      batchId: input.batchId,
      pass: input.pass,
      writtenAt: Date.now(),
      tiles: [...tally.tiles, ...outside],
    });
    // Under the source's breaker key, as its requests are: an alert on an endpoint joins its own fallbacks.
    for (const [tier, n] of tally.fallbacks)
      deps.metrics?.fallback(plan.sourceName, sourceBreakerKey(plan.source), tier, n);
    // The mosaic was cancelled: its tiles are in the journal for the partial manifest; the workflow must see
    // a cancellation, not a finished batch it would go on from.
    if (ctx?.cancellationDetails?.cancelRequested)
      throw new CancelledFailure('mosaic cancelled; the finished tiles are in the journal');
    return {
      counts: tally.counts,
      deferred: tally.deferred,
      retryAfterMs: tally.retryAfterMs,
      breakerStates: [...tally.states],
      requests: tally.requests,
      ...(tally.configError !== undefined ? { configError: tally.configError } : {}),
    };
  };
}

/** What a batch fetches, and with what. */
interface BatchFetch {
  fetchTiles: ReturnType<typeof makeFetchBatch>;
  plan: MosaicBatchInput['plan'];
  input: MosaicBatchInput;
  /** The batch's tiles inside the coverage. */
  addresses: TileAddress[];
  ctx: Context | undefined;
}

/** The batch's tiles fetched, resuming from (and recording into) its checkpoint when a workflow runs it. */
async function fetchWithCheckpoint({ fetchTiles, plan, input, addresses, ctx }: BatchFetch): Promise<TileResult[]> {
  // Every finished request, outside Temporal: a retry resumes from it whatever became of this attempt.
  const checkpoint = ctx ? await openCheckpoint(plan.journalDir, input.batchId, ctx) : null;
  try {
    // Also on a first attempt: a batch that moved to the main task queue is a new activity of the same batch.
    // Heartbeating while it loads (a bucket checkpoint of a long attempt is many objects), with the details
    // the last attempt left, so a retry of this one still resumes from them.
    const resumed = checkpoint
      ? await checkpoint.load(addresses, { heartbeat: () => ctx?.heartbeat(ctx.info.heartbeatDetails) })
      : undefined;
    return await fetchTiles(
      {
        sourceName: plan.sourceName,
        source: plan.source,
        ...(plan.sourcesFile !== undefined ? { sourcesFile: plan.sourcesFile } : {}),
        tiles: addresses,
        storeRoot: plan.storeRoot,
        breaker: plan.breaker,
        whenRefused: input.whenRefused,
        ...(plan.refreshBefore !== undefined ? { keepFetchedSince: plan.refreshBefore, conditional: true } : {}),
        ...(plan.directChunks ? { keepChunks: true } : {}),
        ...(usableMirrors(plan).length ? { mirrors: usableMirrors(plan) } : {}),
      },
      { ...(resumed ? { resumed } : {}), ...(checkpoint ? { onFinished: (k, r) => checkpoint.append(k, r) } : {}) },
    );
  } finally {
    await checkpoint?.close();
  }
}

/** A batch's fetch results, with what the journal and the summary need of them. */
interface BatchResults {
  results: TileResult[];
  /** The plan's index of each result's tile. */
  indices: number[];
  plan: MosaicBatchInput['plan'];
  input: MosaicBatchInput;
  /** Tiles of the selection outside the coverage. */
  outside: number;
}

/** The batch's journal records, counts by status and fallback tier, the tiles left to wait for, and the rest. */
interface BatchTally {
  tiles: ManifestTile[];
  counts: StatusCounts;
  fallbacks: Map<FallbackTier, number>;
  deferred: number[];
  states: Set<BreakerStateName>;
  retryAfterMs: number | null;
  requests: number;
  configError: string | undefined;
}

/** Each result's record, and the batch's counts, waits and breaker states. */
function tallyResults({ results, indices, plan, input, outside }: BatchResults): BatchTally {
  const counts = zeroStatusCounts();
  counts.outside = outside;
  const fallbacks = new Map<FallbackTier, number>();
  const deferred: number[] = [];
  const states = new Set<BreakerStateName>();
  let retryAfterMs: number | null = null;
  let requests = 0;
  let configError: string | undefined;
  const tiles: ManifestTile[] = results.map((r, k) => {
    const i = indices[k]!;
    requests += r.attempts;
    if (r.configError && r.status === 'failed') configError ??= r.reason;
    if (r.breakerState) states.add(r.breakerState);
    const status = manifestStatus(r);
    // Under `wait`, a tile that failed in a way a later attempt may cure during the first pass (while the
    // breaker was tripping, typically) waits too, once; one that keeps failing is dead-lettered.
    const waits =
      !input.final &&
      (r.status === 'deferred' || (plan.fallback === 'wait' && status === 'dead-lettered' && input.pass === 0));
    if (waits) {
      deferred.push(i);
      if (r.retryAfterMs !== undefined) retryAfterMs = Math.max(retryAfterMs ?? 0, r.retryAfterMs);
    } else {
      counts[status]++;
      const tier = fallbackTier(status, r.breakerState, r.tier);
      if (tier) fallbacks.set(tier, (fallbacks.get(tier) ?? 0) + 1);
    }
    return journalTile(r, i, status, input.pass);
  });
  return { tiles, counts, fallbacks, deferred, states, retryAfterMs, requests, configError };
}

/** A fetch result as the journal records it. */
function journalTile(r: TileResult, i: number, status: ManifestStatus, pass: number): ManifestTile {
  return {
    i,
    z: r.z,
    x: r.x,
    y: r.y,
    status,
    ...(r.kind !== undefined ? { kind: r.kind } : {}),
    reason: r.reason,
    attempts: r.attempts,
    ...(r.httpStatus !== undefined ? { httpStatus: r.httpStatus } : {}),
    ...(r.breakerState !== undefined ? { breakerState: r.breakerState } : {}),
    ...(r.abandonedAfterMs !== undefined ? { abandonedAfterMs: r.abandonedAfterMs } : {}),
    ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}),
    pass,
    ...(r.configError && r.status === 'failed' ? { configError: true as const } : {}),
    ...(r.path !== undefined && (status === 'ok' || status === 'stale') ? { path: r.path } : {}),
    ...(r.region !== undefined && status === 'ok' ? { region: r.region } : {}),
    ...(tierOf(status, r) !== undefined ? { tier: tierOf(status, r)! } : {}),
  };
}

/** The plan's mirrors whose contract holds, as a fetch takes them. */
function usableMirrors(plan: Pick<MosaicBatchInput['plan'], 'mirrors'>): { name: string; source: SourceConfig }[] {
  return (plan.mirrors ?? []).filter((m) => m.usable).map(({ name, source }) => ({ name, source }));
}

/** Who served a tile, as the manifest says: the primary, a mirror, a stale copy or a hole; none for a tile not served. */
export function tierOf(status: ManifestStatus, r: Pick<TileResult, 'tier'>): ManifestTile['tier'] {
  if (status === 'ok') return r.tier ?? 'primary';
  if (status === 'stale' || status === 'hole') return status;
  return undefined;
}

/**
 * The tiles a block will not request because its source has a configuration error: recorded `failed` with it
 * (no request), as one journal, so the manifest accounts for every tile and the re-drive of a fixed source
 * finds them.
 */
async function recordConfigError(
  plan: MosaicBatchInput['plan'],
  input: MosaicBatchInput,
  deps: FetchDeps,
): Promise<MosaicBatchSummary> {
  const selection = deps.roots
    ? checkSelection(input.tiles, plan, plan.blockTiles, 'mosaic batch: tiles')
    : input.tiles;
  // The workflow's copy of a batch's reason: bounded, as any reason.
  const reason = String(input.configError).slice(0, 2_000);
  const { inside, outside } = await splitByCoverage(plan, selectionIndices(selection), input.pass);
  const tiles: ManifestTile[] = inside.map((i) => ({
    i,
    ...tileOf(plan.grid, i),
    status: 'failed',
    kind: 'permanent',
    reason,
    attempts: 0,
    pass: input.pass,
    configError: true,
  }));
  await writeJournal(plan.journalDir, {
    batchId: input.batchId,
    pass: input.pass,
    writtenAt: Date.now(),
    tiles: [...tiles, ...outside],
  });
  const counts = zeroStatusCounts();
  counts.failed = tiles.length;
  counts.outside = outside.length;
  return { counts, deferred: [], retryAfterMs: null, breakerStates: [], requests: 0, configError: reason };
}

/** The selection's tiles inside the plan's coverage (all without one), and the records of those outside it. */
async function splitByCoverage(
  plan: MosaicBatchInput['plan'],
  indices: number[],
  pass: number,
): Promise<{ inside: number[]; outside: ManifestTile[] }> {
  if (!plan.coverage) return { inside: indices, outside: [] };
  const covered = await coveredTiles(
    plan,
    plan.source.grid,
    indices.map((i) => tileOf(plan.grid, i)),
  );
  const outside = indices
    .filter((_, k) => !covered[k])
    .map((i): ManifestTile => ({
      i,
      ...tileOf(plan.grid, i),
      status: 'outside',
      reason: 'outside the coverage: not fetched',
      attempts: 0,
      pass,
    }));
  return { inside: indices.filter((_, k) => covered[k]), outside };
}

/** The checkpoint of this batch in this workflow run (none for an activity no workflow started). */
async function openCheckpoint(dir: string, batchId: string, ctx: Context): Promise<Checkpoint | null> {
  const run = ctx.info.workflowExecution;
  if (!run) return null;
  // A bucket has no folders to make.
  if (!isObjectUrl(dir)) await makeDirs(dir);
  return openBatchCheckpoint(dir, batchId, `${run.workflowId}/${run.runId}`, (why) => {
    ctx.log.warn(why);
  });
}
