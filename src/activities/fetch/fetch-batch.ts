import { Context } from '@temporalio/activity';
import { breakerKey, type BreakerStateName, type OutcomeKind } from '../../breaker';
import { tileUrl, type TileAddress } from '../../sources/request-url';
import type { SourceConfig } from '../../sources/schema';
import type { BreakerGuard, GuardDecision } from '../guard';
import { applyAuth, redactUrl } from '../http/credentials';
import type { EndpointPools } from '../http/endpoint-pool';
import { fetchUrl } from '../http/fetch-url';
import { TileStore } from '../store/tile-store';
import { classify, type Verdict } from '../validate/classify';
import { backoffMs, DEFAULT_RETRY, retryable, type RetryPolicy } from './retry-policy';

/** What to do with a tile the breaker refuses (decided by the pipeline in advance). */
export type WhenRefused = 'defer' | 'stale' | 'hole';

export interface FetchBatchInput {
  /** The source's name: the tile store's folder and the manifest's label. */
  sourceName: string;
  source: SourceConfig;
  tiles: TileAddress[];
  storeRoot: string;
  /** Go through the fleet-wide breaker (default true). */
  breaker?: boolean;
  whenRefused?: WhenRefused;
  retry?: Partial<RetryPolicy>;
  /** Send If-None-Match / If-Modified-Since for tiles the store already holds. */
  conditional?: boolean;
}

export type TileStatus = 'ok' | 'stale' | 'hole' | 'deferred' | 'failed';

/** The account of one tile: every tile of a batch gets exactly one. */
export interface TileResult extends TileAddress {
  status: TileStatus;
  /** The outcome kind of the last attempt (absent when no request was made). */
  kind?: OutcomeKind;
  reason: string;
  attempts: number;
  httpStatus?: number | null;
  bytes?: number;
  latencyMs?: number;
  path?: string;
  retryAfterMs?: number;
  /** The breaker state that decided the tile when it was refused. */
  breakerState?: BreakerStateName;
  configError?: boolean;
}

export interface FetchDeps {
  pools: EndpointPools;
  /** The process's guard; absent: no breaker. */
  guard?: BreakerGuard;
}

/**
 * Fetches a batch of tiles with the source's concurrency (scaled by the breaker's ramp allowance), validates
 * and stores them, and returns one result per tile, in input order. Heartbeats the results so far; a retried
 * activity resumes from them and never fetches a finished tile again.
 */
export function makeFetchBatch(deps: FetchDeps) {
  return async function fetchTiles(input: FetchBatchInput): Promise<TileResult[]> {
    const ctx = activityContext();
    const resumed = (ctx?.info.heartbeatDetails as { results?: (TileResult | null)[] } | undefined)?.results;
    const results: (TileResult | null)[] = resumed && resumed.length === input.tiles.length ? resumed : input.tiles.map(() => null);
    const policy: RetryPolicy = { ...DEFAULT_RETRY, ...input.retry };
    const store = new TileStore(input.storeRoot);
    const key = breakerKey(input.source.url, input.source.breakerPartition ? { partition: input.source.breakerPartition } : {});
    const useBreaker = input.breaker !== false && deps.guard !== undefined;
    let next = 0;
    let lastBeat = 0;
    // The breaker's ramp after a recovery: only this share of the source's concurrency may be in flight.
    let allowance = 1;
    let active = 0;
    const onDecision = (d: GuardDecision) => {
      if (d.kind === 'proceed') allowance = d.allowance;
    };
    const beat = (force = false) => {
      if (!ctx || (!force && Date.now() - lastBeat < 1_000)) return;
      lastBeat = Date.now();
      ctx.heartbeat({ results });
    };
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= input.tiles.length) return;
        if (results[i]) continue;
        if (ctx?.cancellationSignal.aborted) return;
        while (active >= Math.max(1, Math.ceil(input.source.concurrency * allowance))) await sleep(50);
        active++;
        try {
          results[i] = await fetchOne(deps, store, input, input.tiles[i]!, key, useBreaker, policy, onDecision, ctx?.cancellationSignal);
        } finally {
          active--;
        }
        beat();
      }
    };
    // Also beat while no tile finishes (one slow tile at concurrency 1), so a short heartbeat timeout is safe
    // and a lost worker's batch is retried within seconds.
    const pulse = ctx ? setInterval(() => beat(true), 5_000) : null;
    try {
      await Promise.all(Array.from({ length: Math.max(1, input.source.concurrency) }, worker));
    } finally {
      if (pulse) clearInterval(pulse);
    }
    beat(true);
    // Cancelled: unfinished tiles are accounted for too.
    return results.map((r, i) => r ?? { ...input.tiles[i]!, status: 'deferred', reason: 'activity cancelled before this tile', attempts: 0 });
  };
}

async function fetchOne(
  deps: FetchDeps,
  store: TileStore,
  input: FetchBatchInput,
  tile: TileAddress,
  key: string,
  useBreaker: boolean,
  policy: RetryPolicy,
  onDecision: (d: GuardDecision) => void,
  signal: AbortSignal | undefined,
): Promise<TileResult | null> {
  const { source } = input;
  const stored = input.conditional || input.whenRefused === 'stale' ? await store.get(input.sourceName, tile) : null;
  let verdict: Verdict | null = null;
  let made = 0;
  let url = tileUrl(source, tile);
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    const headers: Record<string, string> = { 'user-agent': source.userAgent, ...source.headers };
    if (input.conditional && stored?.meta.etag) headers['if-none-match'] = stored.meta.etag;
    if (input.conditional && stored?.meta.lastModified) headers['if-modified-since'] = stored.meta.lastModified;
    try {
      url = applyAuth(source.auth, tileUrl(source, tile), headers);
    } catch (err) {
      // A missing credential is the configuration's fault: no request, no breaker outcome, a clear reason.
      return { ...tile, status: 'failed', kind: 'permanent', configError: true, attempts: 0, reason: (err as Error).message };
    }
    const decision: GuardDecision | null = useBreaker ? await deps.guard!.acquire(key) : null;
    if (decision) onDecision(decision);
    if (decision?.kind === 'refused') return refused(input, tile, decision, stored, attempt - 1);
    made = attempt;
    const deadline = AbortSignal.timeout(source.timeouts.totalMs);
    const x = await fetchUrl(url, { dispatcher: deps.pools.for(source), headers, signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
    if (signal?.aborted) {
      // Our own abort is not the endpoint's failure: report nothing, and leave the tile unfinished.
      if (decision) deps.guard!.abandon(decision);
      return null;
    }
    if (x.status === 304 && stored) {
      if (decision) deps.guard!.release(decision, { kind: 'success', latencyMs: x.latencyMs });
      return { ...tile, status: 'ok', kind: 'success', reason: 'not modified since the stored copy', attempts: attempt, httpStatus: 304, latencyMs: x.latencyMs, path: stored.path, bytes: stored.meta.bytes };
    }
    verdict = await classify(x, { width: source.tileSize, height: source.tileSize, blankIsFailure: source.blankTiles === 'fail' });
    if (decision) deps.guard!.release(decision, { kind: verdict.kind, latencyMs: verdict.latencyMs, ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}) });
    if (verdict.kind === 'success') {
      const saved = await store.put(input.sourceName, tile, x.body, {
        fetchedAt: Date.now(),
        contentType: x.headers['content-type'] ?? source.format,
        ...(x.headers['etag'] ? { etag: x.headers['etag'] } : {}),
        ...(x.headers['last-modified'] ? { lastModified: x.headers['last-modified'] } : {}),
        ...(verdict.image ? { width: verdict.image.width, height: verdict.image.height } : {}),
      });
      return { ...tile, status: 'ok', kind: 'success', reason: verdict.reason, attempts: attempt, httpStatus: verdict.httpStatus, bytes: verdict.bytes, latencyMs: verdict.latencyMs, path: saved.path };
    }
    if (verdict.kind === 'neutral' && !verdict.configError) {
      return { ...tile, status: 'hole', kind: 'neutral', reason: verdict.reason, attempts: attempt, httpStatus: verdict.httpStatus };
    }
    const tooLong = (verdict.retryAfterMs ?? 0) > policy.maxRetryAfterMs;
    if (!retryable(verdict.kind) || attempt === policy.attempts || tooLong || signal?.aborted) break;
    await sleep(backoffMs(attempt - 1, policy, verdict.retryAfterMs ?? 0), signal);
  }
  const v = verdict!;
  const redacted = redactUrl(url, source.auth);
  const result: TileResult = {
    ...tile,
    status: v.kind === 'rate-limited' && v.retryAfterMs !== undefined ? 'deferred' : 'failed',
    kind: v.kind,
    reason: `${v.reason} (${redacted})`,
    attempts: made,
    httpStatus: v.httpStatus,
    bytes: v.bytes,
    latencyMs: v.latencyMs,
    ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}),
    ...(v.configError ? { configError: true } : {}),
  };
  return result;
}

function refused(input: FetchBatchInput, tile: TileAddress, d: Extract<GuardDecision, { kind: 'refused' }>, stored: Awaited<ReturnType<TileStore['get']>>, attempts: number): TileResult {
  const base = { ...tile, attempts, breakerState: d.state, ...(d.retryAfterMs !== null ? { retryAfterMs: d.retryAfterMs } : {}) };
  if (input.whenRefused === 'stale' && stored) {
    return { ...base, status: 'stale', reason: `${d.reason}; served the copy fetched ${new Date(stored.meta.fetchedAt).toISOString()}`, path: stored.path, bytes: stored.meta.bytes };
  }
  if (input.whenRefused === 'hole') return { ...base, status: 'hole', reason: `${d.reason}; left as a hole (not rendered)` };
  return { ...base, status: 'deferred', reason: `${d.reason}${input.whenRefused === 'stale' ? '; no stored copy to serve' : ''}` };
}

function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined; // called outside an activity (the `tile` command, benchmarks)
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
