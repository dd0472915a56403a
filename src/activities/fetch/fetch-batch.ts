import { createHash } from 'node:crypto';
import { breakerKey, type BreakerStateName, type OutcomeKind } from '../../breaker';
import type { TileAddress } from '../../sources/request-url';
import { resendDropped } from './dropped-call';
import { probeBoundMs } from '../guard/probe-bound';
export { probeBoundMs } from '../guard/probe-bound';
import { cutMetatile, requestUnits, type RequestUnit } from './metatiles';
import type { SourceConfig } from '../../sources/schema';
import type { BreakerGuard, GuardDecision } from '../guard';
import { scrubSecrets } from '../../breaker/redact';
import { applyAuth, credentialValues, redactUrl } from '../http/credentials';
import type { EndpointPools } from '../http/endpoint-pool';
import { fetchUrl } from '../http/fetch-url';
import { redirectPolicy } from '../http/redirects';
import { openTileStore } from '../store/open-store';
import { servedLedgerRoot } from '../store/served-ledger';
import { StoreEscapeError } from '../store/store-bounds';
import type { StoredTile, Tiles } from '../store/tiles';
import { storageFor } from '../storage/storage';
import { classify, type Verdict } from '../validate/classify';
import {
  judgeRequestFault,
  processShapes,
  requestShape,
  shapeKey,
  wantsRecord,
  type ShapeMemory,
} from '../validate/shape-memory';
import { backoffMs, DEFAULT_RETRY, retryable, type RetryPolicy } from './retry-policy';
import { activityContext } from '../activity-context';
import { ApplicationFailure } from '@temporalio/common';
import { attemptLease } from './heartbeat-lease';
import { setTimeout as delay } from 'node:timers/promises';
import { confineLocation } from '../confine/confine-location';
import { isObjectUrl, locationWithin } from '../storage/location';
import path from 'node:path';
import { checkCredentialedSource } from '../confine/credentialed-source';
import type { WorkerRoots } from '../confine/roots';
import type { WorkerMetrics } from '../metrics/worker-metrics';

/**
 * Failures a later attempt may cure: the server's, not the request's (and the worker's own, `local`: a re-drive
 * may run on a worker whose resolver works). A mosaic dead-letters such a tile for a
 * re-drive, and the stale fallback draws its stored copy.
 */
export const CURABLE_KINDS: ReadonlySet<string> = new Set(['transient', 'service-exception', 'rate-limited', 'local']);

/** What to do with a tile the breaker refuses (decided by the pipeline in advance). */
export type WhenRefused = 'defer' | 'stale' | 'hole';

export interface FetchBatchInput {
  /** The source's name: the tile store's folder and the manifest's label. */
  sourceName: string;
  source: SourceConfig;
  /** The sources file `source` was read from; on a worker, a source with credentials must match it. */
  sourcesFile?: string;
  tiles: TileAddress[];
  storeRoot: string;
  /** Go through the fleet-wide breaker (default true). */
  breaker?: boolean;
  whenRefused?: WhenRefused;
  retry?: Partial<RetryPolicy>;
  /** Send If-None-Match / If-Modified-Since for tiles the store already holds; a 304 renews the stored copy's fetchedAt. */
  conditional?: boolean;
  /**
   * Refresh mode (epoch ms): a unit whose tiles the store all holds from at or after this is not requested;
   * its tiles are ok from the store.
   */
  keepFetchedSince?: number;
  /**
   * WMS metatiles are kept whole, not cut into stored tiles: each tile's result points into its chunk
   * (`path` + `region`). For a mosaic that needs no tile cache.
   */
  keepChunks?: boolean;
  /**
   * Mirrors whose contract holds, in order: a tile the source's breaker refuses is fetched from the first whose
   * own breaker lets it through, before the `whenRefused` fallback applies (src/activities/mirror/).
   */
  mirrors?: { name: string; source: SourceConfig }[];
}

export type TileStatus = 'ok' | 'stale' | 'hole' | 'deferred' | 'failed';

/** The account of one tile: every tile of a batch gets exactly one. */
export interface TileResult extends TileAddress {
  status: TileStatus;
  /**
   * The outcome kind of the last request made (absent when none was): also when the breaker then refused the
   * next attempt or abandoned this one (`breakerState` set). An abandoned call is `transient`, the stall the
   * breaker counted it as.
   */
  kind?: OutcomeKind;
  reason: string;
  attempts: number;
  httpStatus?: number | null;
  bytes?: number;
  latencyMs?: number;
  path?: string;
  retryAfterMs?: number;
  /** With keepChunks: where the tile lies in the chunk image at `path`. */
  region?: { left: number; top: number };
  /** The breaker state that decided the tile when it refused a request (or abandoned one in flight). */
  breakerState?: BreakerStateName;
  /** The last request was in flight this long (ms) when the breaker opened and abandoned it. */
  abandonedAfterMs?: number;
  configError?: boolean;
  /** `mirror:<name>`: a mirror served it, the source's breaker having refused it. */
  tier?: `mirror:${string}`;
}

export interface FetchDeps {
  pools: EndpointPools;
  /** The process's guard (only what a batch uses of it, so tests can watch the outcomes); absent: no breaker. */
  guard?: Pick<BreakerGuard, 'acquire' | 'release' | 'abandon'> &
    Partial<Pick<BreakerGuard, 'learnProbe' | 'restarted' | 'waitOutPause'>>;
  /** On a worker: tile stores only under these roots' output folders. */
  roots?: WorkerRoots;
  /**
   * When each request shape last succeeded, and what this process marked and read of the tile store's served
   * records (default: the process's); tests give their own, and a clock.
   */
  shapes?: ShapeMemory;
  now?: () => number;
  /** Each request's outcome and duration (default: nowhere). */
  metrics?: WorkerMetrics;
}

/**
 * How often a batch records its results as heartbeat details while tiles finish. The worker sends the latest
 * at most every 1.5 s (`maxHeartbeatThrottleInterval`, src/client/worker.ts): a batch resumed from heartbeats
 * alone loses at most 2 s of finished tiles. A mosaic's batch also checkpoints each finished request outside
 * Temporal (`onFinished`), and loses none.
 */
export const BEAT_EVERY_MS = 500;
/** How often a batch heartbeats while no tile finishes: well within the 6 s heartbeat timeout (mosaic-block.ts). */
export const PULSE_MS = 1_000;

/** Configuration errors for one request shape after which a batch stops requesting it. */
export const CONFIG_ERRORS_TO_STOP = 3;

/** What a caller keeps of a batch outside Temporal (the mosaic's checkpoint): results to resume from, and each new one. */
export interface BatchResume {
  /** Results an earlier attempt recorded, position by position (null where none). */
  resumed?: readonly (TileResult | null)[];
  /** Told the positions of the tiles one request finished, once their files are stored. */
  onFinished?: (indices: readonly number[], results: readonly (TileResult | null)[]) => void;
}

/** The breaker key a source's requests go through: the `endpoint` label of its request and fallback metrics. */
export function sourceBreakerKey(source: Pick<SourceConfig, 'url' | 'breakerPartition'>): string {
  return breakerKey(source.url, source.breakerPartition ? { partition: source.breakerPartition } : {});
}

/**
 * Fetches a batch of tiles with the source's concurrency (scaled by the breaker's ramp allowance), validates
 * and stores them, and returns one result per tile, in input order. Heartbeats the results so far; a retried
 * activity resumes from them (and from `resume.resumed`) and never fetches a finished tile again.
 */
export function makeFetchBatch(deps: FetchDeps) {
  return async function fetchTiles(input: FetchBatchInput, resume: BatchResume = {}): Promise<TileResult[]> {
    const ctx = activityContext();
    const beaten = (ctx?.info.heartbeatDetails as { results?: (TileResult | null)[] } | undefined)?.results;
    const policy: RetryPolicy = { ...DEFAULT_RETRY, ...input.retry };
    const storeRoot = deps.roots
      ? await confineLocation(input.storeRoot, deps.roots, 'storeRoot', 'fetch batch')
      : input.storeRoot;
    // Heartbeat details can be written by anyone who may heartbeat activities, a checkpoint by anyone who may
    // write its folder: a resumed tile must be the tile at that position, and its file one this store holds, or
    // the tile is fetched again.
    const fromStore = (r: TileResult | null | undefined, t: TileAddress) =>
      r &&
      r.z === t.z &&
      r.x === t.x &&
      r.y === t.y &&
      (r.path === undefined || locationWithin(isObjectUrl(r.path) ? r.path : path.resolve(r.path), storeRoot))
        ? r
        : null;
    const heartbeat = beaten && beaten.length === input.tiles.length ? beaten : [];
    const checkpoint = resume.resumed?.length === input.tiles.length ? resume.resumed : [];
    // The union: the checkpoint is the fresher of the two (written as tiles finish, not every 1.5 s).
    const results: (TileResult | null)[] = input.tiles.map(
      (t, i) => fromStore(checkpoint[i], t) ?? fromStore(heartbeat[i], t),
    );
    if (deps.roots) {
      await checkCredentialedSource(input.source, input.sourceName, input.sourcesFile, deps.roots, 'fetch batch');
      // A mirror sends its credentials as the source does: only as the operator's sources file pairs them.
      for (const m of input.mirrors ?? [])
        await checkCredentialedSource(m.source, m.name, input.sourcesFile, deps.roots, 'fetch batch');
    }
    const store = openTileStore(storeRoot);
    // The served records that follow the source across outputs (served-ledger.ts); none without roots.
    // Confined as the store is (a symlink planted there must not lead out of the roots); refused, it is not kept.
    const ledgerAt = deps.roots ? servedLedgerRoot(storeRoot, deps.roots) : null;
    const ledgerRoot =
      ledgerAt === null || !deps.roots
        ? null
        : await confineLocation(ledgerAt, deps.roots, 'served records', 'fetch batch').catch(() => null);
    const served: ServedRecords = { store, ledger: ledgerRoot === null ? null : openTileStore(ledgerRoot) };
    const key = sourceBreakerKey(input.source);
    const useBreaker = input.breaker !== false && deps.guard !== undefined;
    let next = 0;
    let lastBeat = 0;
    // The breaker's ramp after a recovery: only this share of the source's concurrency may be in flight.
    let allowance = 1;
    let active = 0;
    /** Loops waiting for a request to answer. */
    const waiters: (() => void)[] = [];
    // Whether the server still takes this attempt's heartbeats: cut off for longer than its heartbeat timeout,
    // its batch may already run again elsewhere, so it starts no further request (heartbeat-lease.ts).
    const lease = attemptLease(ctx, deps.now ?? Date.now);
    const halted = () => ctx?.cancellationSignal.aborted === true || lease?.lost() != null;
    const onDecision = (d: GuardDecision) => {
      if (d.kind === 'proceed') allowance = d.allowance;
    };
    const beat = (force = false) => {
      // At its own pace (a third of the heartbeat timeout).
      lease?.beat({ results });
      if (!ctx || (!force && Date.now() - lastBeat < BEAT_EVERY_MS)) return;
      lastBeat = Date.now();
      ctx.heartbeat({ results });
    };
    // A retry also keeps what an earlier attempt of this batch stored but did not record (killed, or cut off,
    // between storing a tile and its checkpoint): a tile the store holds from since the batch was scheduled is
    // not asked of the server again. Refresh mode keeps more.
    const retrySince = ctx && ctx.info.attempt > 1 ? ctx.info.scheduledTimestampMs : undefined;
    const keepSince = input.keepFetchedSince ?? retrySince;
    const keepWhy =
      input.keepFetchedSince !== undefined ? 'within the refresh age' : 'stored by an earlier attempt of this batch';
    // One request per unit: a tile, or the tiles of one metatile (WMS sources with `metatile`).
    // Only the tiles not finished yet (a resumed batch): a metatile partly done before is fetched for the rest.
    const pending = input.tiles.map((_, i) => i).filter((i) => !results[i]);
    const units = requestUnits(
      input.source,
      pending.map((i) => input.tiles[i]!),
    ).map((u) => ({ ...u, members: u.members.map((k) => pending[k]!) }));
    // A shape never served in this process is requested one unit at a time (a wrong layer costs a few requests,
    // not `concurrency` of them), and no more after CONFIG_ERRORS_TO_STOP configuration errors. The store is not
    // read for that: once a fault has it read and it records the shape served, the fault is systemic and the
    // rest go at full concurrency, as many as the breaker lets through.
    const shapes = deps.shapes ?? processShapes;
    const now = deps.now ?? Date.now;
    // A shape whose request the breaker refused made no request to learn from, and one a mirror served is not
    // failing for its configuration: its units need not go one by one (with mirrors, each such unit is fetched
    // from a mirror, which must not be serialised behind the others).
    const refusedShapes = new Set<string>();
    const known = (shape: string) =>
      refusedShapes.has(shape) ||
      shapes.served(shape) ||
      [served.store, served.ledger].some(
        (t) => t !== null && shapes.recorded(recordOf(t, input.sourceName, shape), now()) !== null,
      );
    const probing = new Set<string>();
    const configErrors = new Map<string, number>();
    const stopped = new Map<string, string>();
    const worker = async () => {
      for (;;) {
        const u = next++;
        if (u >= units.length) return;
        const unit = units[u]!;
        if (unit.members.every((i) => results[i])) continue;
        if (halted()) return;
        if (keepSince !== undefined && (await keptFresh(store, input, unit.members, keepSince, results, keepWhy))) {
          beat();
          continue;
        }
        const shape = requestShape(input.source, unit.url);
        while (!known(shape) && probing.has(shape) && !stopped.has(shape) && !halted()) await sleep(50);
        if (halted()) return;
        const stop = stopped.get(shape);
        if (stop !== undefined) {
          for (const i of unit.members)
            results[i] ??= {
              ...input.tiles[i]!,
              status: 'failed',
              kind: 'permanent',
              configError: true,
              attempts: 0,
              reason: stop,
            };
          continue;
        }
        const solo = !known(shape);
        if (solo) probing.add(shape);
        // Woken as soon as a request answers; the timer also notices the ramp's allowance growing.
        while (active >= Math.max(1, Math.ceil(input.source.concurrency * allowance)))
          await new Promise<void>((r) => (waiters.push(r), setTimeout(r, 50)));
        if (halted()) {
          if (solo) probing.delete(shape);
          return;
        }
        active++;
        // Counted in flight until its last answer is in; storing it (a disk or a bucket) is not a request.
        let requesting = true;
        const answered = () => {
          if (requesting) {
            active--;
            waiters.shift()?.();
          }
          requesting = false;
        };
        try {
          const out = await fetchUnit(
            deps,
            served,
            input,
            unit,
            key,
            useBreaker,
            policy,
            onDecision,
            ctx?.cancellationSignal,
            { made: 0 },
            answered,
          );
          if (out) {
            unit.members.forEach((i, k) => (results[i] = out[k]!));
            resume.onFinished?.(unit.members, results);
            if (out.some((r) => (r.breakerState !== undefined && r.attempts === 0) || r.tier !== undefined))
              refusedShapes.add(shape);
          }
          const configError = out?.find((r) => r.configError && r.attempts > 0);
          if (configError) {
            const n = (configErrors.get(shape) ?? 0) + 1;
            configErrors.set(shape, n);
            if (n >= CONFIG_ERRORS_TO_STOP)
              stopped.set(shape, `${configError.reason}; not requested after ${n} configuration errors`);
          }
        } finally {
          answered();
          if (solo) probing.delete(shape);
        }
        beat();
      }
    };
    // Also beat while no tile finishes (one slow tile at concurrency 1, a wait for a connection slot or the
    // breaker), well within the batch's short heartbeat timeout, so only a lost worker's batch is retried.
    const pulse = ctx ? setInterval(() => beat(true), PULSE_MS) : null;
    // The first confirmation goes out before any request: an attempt the server has already given up on learns it at once.
    lease?.beat({ results });
    try {
      // Twice as many loops as requests allowed in flight: while one stores its tiles (a PUT to a bucket takes
      // as long as a request), another requests; `active` still bounds the requests.
      await Promise.all(Array.from({ length: 2 * Math.max(1, input.source.concurrency) }, worker));
    } finally {
      if (pulse) clearInterval(pulse);
    }
    beat(true);
    const lost = lease?.lost();
    if (lost) {
      // Its finished tiles are in the heartbeat and the caller's checkpoint; the attempt that has the batch now
      // resumes from them. Retryable: should the server still know this attempt, its retry does the rest.
      throw ApplicationFailure.retryable(`fetch batch stopped starting requests: ${lost}`, 'HeartbeatLost');
    }
    // Cancelled: unfinished tiles are accounted for too.
    return results.map(
      (r, i) =>
        r ?? { ...input.tiles[i]!, status: 'deferred', reason: 'activity cancelled before this tile', attempts: 0 },
    );
  };
}

/** A shape's served record in a tile store, as this process's memory names it. */
const recordOf = (store: Tiles, sourceName: string, shape: string) => `${store.root}\n${sourceName}\n${shape}`;

/** The stores a shape's served record is written to and read from: the tile store, and the source's ledger. */
interface ServedRecords {
  store: Tiles;
  ledger: Tiles | null;
}

/**
 * Records that the shape was served, in the tile store and in the ledger under the output root: on its first
 * success in this process, then at most every MARK_EVERY_MS each, so it costs nothing per tile. A write that
 * fails costs only the record (the next success tries again): the tiles were stored, or not, on their own.
 */
async function markServed(
  shapes: ShapeMemory,
  served: ServedRecords,
  sourceName: string,
  shape: string,
  now: number,
): Promise<void> {
  for (const t of [served.store, served.ledger]) {
    if (t === null) continue;
    const where = recordOf(t, sourceName, shape);
    if (!shapes.claimMark(where, now)) continue;
    try {
      await t.markServed(sourceName, shapeKey(shape), now);
    } catch {
      shapes.releaseMark(where);
    }
  }
}

/**
 * When the shape was last recorded served, and where: the tile store's record, else the ledger's (a read of the
 * last minute that found one is not repeated); null when neither has one.
 */
async function recordedServed(
  shapes: ShapeMemory,
  served: ServedRecords,
  sourceName: string,
  shape: string,
  now: number,
): Promise<{ at: number; where: string } | null> {
  let latest: { at: number; where: string } | null = null;
  for (const [t, where] of [
    [served.store, 'the tile store'],
    [served.ledger, 'the records under the output root'],
  ] as const) {
    if (t === null) continue;
    const name = recordOf(t, sourceName, shape);
    let at = shapes.recorded(name, now);
    if (at === null) {
      // The ledger is a second opinion: one that cannot be read is none (the tile store's errors stand).
      const read = t.servedAt(sourceName, shapeKey(shape));
      at = await (t === served.ledger ? read.catch(() => null) : read);
      if (at !== null) shapes.noteRecord(name, at, now);
    }
    if (at !== null && (latest === null || at > latest.at)) latest = { at, where };
  }
  return latest;
}

/**
 * One unit's results. A tile store path that leads outside the store (a symlinked folder or tile) fails the
 * unit's tiles with the refusal, requests counted: recorded like any failure, never a lost batch.
 */
async function fetchUnit(...args: Parameters<typeof requestUnit>): Promise<TileResult[] | null> {
  const tried = args[9];
  try {
    return await requestUnit(...args);
  } catch (err) {
    if (!(err instanceof StoreEscapeError)) throw err;
    const [, , input, unit] = args;
    return unit.members.map((i) => ({
      ...input.tiles[i]!,
      status: 'failed',
      kind: 'permanent',
      reason: err.message,
      attempts: tried.made,
    }));
  }
}

async function requestUnit(
  deps: FetchDeps,
  stores: ServedRecords,
  input: FetchBatchInput,
  unit: RequestUnit,
  key: string,
  useBreaker: boolean,
  policy: RetryPolicy,
  onDecision: (d: GuardDecision) => void,
  signal: AbortSignal | undefined,
  tried: { made: number },
  /** Told once the unit makes no further request: what is left is storing its answer. */
  answered: () => void = () => undefined,
): Promise<TileResult[] | null> {
  const { source } = input;
  const store = stores.store;
  const tiles = unit.members.map((i) => input.tiles[i]!);
  const each = (f: (t: TileAddress, k: number) => TileResult) => tiles.map(f);
  // Conditional refreshes are per tile: a metatile is always fetched whole.
  // The credential values this unit sends, read once: masked wherever the server's answer is quoted.
  const secrets = credentialValues(source.auth);
  const single = unit.meta === null;
  const shapes = deps.shapes ?? processShapes;
  const now = deps.now ?? Date.now;
  const shape = requestShape(source, unit.url);
  const conditional = single && input.conditional ? await store.get(input.sourceName, tiles[0]!) : null;
  let verdict: Verdict | null = null;
  let url = unit.url;
  // Calls sent again at once after the server dropped them unanswered: requests too, in `attempts`.
  let resent = 0;
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    const headers: Record<string, string> = { 'user-agent': source.userAgent, ...source.headers };
    if (conditional?.meta.etag) headers['if-none-match'] = conditional.meta.etag;
    if (conditional?.meta.lastModified) headers['if-modified-since'] = conditional.meta.lastModified;
    try {
      url = applyAuth(source.auth, unit.url, headers);
    } catch (err) {
      // A missing credential is the configuration's fault: no request, no breaker outcome, a clear reason.
      return each((t) => ({
        ...t,
        status: 'failed',
        kind: 'permanent',
        configError: true,
        attempts: 0,
        reason: (err as Error).message,
      }));
    }
    // A pause the endpoint asked for (its Retry-After, to this process or the fleet) is waited out holding no
    // connection; then a connection slot (queued here, not in the pool): the breaker decides, and the clocks
    // start, only when the request can go out at once.
    if (useBreaker) await deps.guard!.waitOutPause?.(key, signal);
    const slot = await deps.pools.slot(source, url, signal);
    if (!slot) return null;
    let decision: GuardDecision | null;
    let x: Awaited<ReturnType<typeof fetchUrl>>;
    let deadline: AbortSignal;
    let lease: AbortSignal | null;
    let shed: AbortSignal | undefined;
    try {
      const asked = Date.now();
      decision = useBreaker ? await deps.guard!.acquire(key) : null;
      if (decision) onDecision(decision);
      if (decision?.kind === 'refused') {
        slot.release();
        // A retry the breaker refused: the record keeps what the last request got, then the refusal.
        const last = verdict;
        const d = last
          ? {
              ...decision,
              reason: `${lastReason(last, attempt - 1, url, source, secrets)}; attempt ${attempt} not sent: ${decision.reason}`,
            }
          : decision;
        const made = last ? { kind: last.kind, httpStatus: last.httpStatus, latencyMs: last.latencyMs } : {};
        const mirrored = await fromMirrors(deps, store, input, tiles, policy, signal, d.reason);
        if (mirrored === null) return null;
        const stored = await staleCopies(store, input, tiles, mirrored);
        return each((t, k) => servedOrRefused(mirrored[k], refused(input, t, d, stored[k] ?? null, tried.made, made)));
      }
      tried.made = attempt + resent;
      deadline = AbortSignal.timeout(source.timeouts.totalMs);
      // The fleet's only probe ends before its token's lease does: past the lease the entity grants another, and
      // two probes would hit a recovering server (the lease may be shorter than the source's totalMs).
      lease = decision?.kind === 'probe' ? AbortSignal.timeout(probeBoundMs(decision.token, Date.now() - asked)) : null;
      // The guard aborts a stalled call when the breaker opens while it waits (a hanging server).
      shed = decision?.kind === 'proceed' ? decision.signal : undefined;
      const options = {
        dispatcher: deps.pools.for(source),
        headers,
        signal: AbortSignal.any([
          deadline,
          ...(signal ? [signal] : []),
          ...(shed ? [shed] : []),
          ...(lease ? [lease] : []),
        ]),
        redirects: redirectPolicy(source),
        ...(source.auth ? { auth: source.auth } : {}),
      };
      x = await fetchUrl(url, options);
      // A call the server dropped unanswered may have been overtaken by its recovery: ask once more now.
      if (decision && resendDropped(decision.kind, x) && !options.signal.aborted) {
        deps.metrics?.request(input.sourceName, key, 'transient', x.latencyMs / 1000);
        deps.guard!.restarted?.(decision);
        tried.made = attempt + ++resent;
        x = await fetchUrl(url, options);
      }
    } finally {
      slot.release();
    }
    if (signal?.aborted) {
      // Our own abort is not the endpoint's failure: report nothing, and leave the tiles unfinished.
      if (decision) deps.guard!.abandon(decision);
      return null;
    }
    if (shed?.aborted && decision) {
      // Counted while it stalled; now refused like any call the open breaker stops: the fallback applies.
      deps.guard!.abandon(decision);
      const why =
        shed.reason instanceof Error ? shed.reason.message : 'breaker open: the call stalled and was abandoned';
      const opened = {
        kind: 'refused' as const,
        key,
        state: 'open' as const,
        retryAfterMs: null,
        reason: scrubSecrets(
          `${why} after ${Math.round(x.latencyMs / 100) / 10} s (${redactUrl(url, source.auth)})`,
          secrets,
        ),
      };
      // Made, not refused: the breaker counted it as a stall (transient) and abandoned it when it opened.
      const made = {
        kind: 'transient' as const,
        httpStatus: x.status,
        latencyMs: x.latencyMs,
        abandonedAfterMs: Math.round(x.latencyMs),
      };
      const mirrored = await fromMirrors(deps, store, input, tiles, policy, signal, opened.reason);
      if (mirrored === null) return null;
      const stored = await staleCopies(store, input, tiles, mirrored);
      return each((t, k) =>
        servedOrRefused(mirrored[k], refused(input, t, opened, stored[k] ?? null, tried.made, made)),
      );
    }
    if (x.status === 304 && conditional) {
      deps.metrics?.request(input.sourceName, key, 'success', x.latencyMs / 1000);
      shapes.succeeded(shape, now());
      if (decision) deps.guard!.release(decision, { kind: 'success', latencyMs: x.latencyMs });
      answered();
      await markServed(shapes, stores, input.sourceName, shape, now());
      await renew(store, input.sourceName, tiles[0]!, conditional, now());
      return each((t) => ({
        ...t,
        status: 'ok',
        kind: 'success',
        reason: 'not modified since the stored copy',
        attempts: tried.made,
        httpStatus: 304,
        latencyMs: x.latencyMs,
        path: conditional.path,
        bytes: conditional.meta.bytes,
      }));
    }
    // The whole response is validated; the breaker counts this one request, whatever the number of tiles.
    const chunk = unit.meta !== null && input.keepChunks === true;
    const classified = await classify(x, {
      width: unit.width,
      height: unit.height,
      blankIsFailure: source.blankTiles === 'fail',
      keepPixels: unit.meta !== null && !chunk,
      secrets,
    });
    // A request-blaming fault: systemic if this request shape succeeded lately (in this process, or as the tile
    // store records it for the fleet and earlier runs), otherwise the configuration's. The store is read only
    // for such a fault that this process's memory cannot judge: rare.
    const judgedAt = now();
    const recordedAt = wantsRecord(classified, shape, shapes, judgedAt)
      ? await recordedServed(shapes, stores, input.sourceName, shape, judgedAt)
      : null;
    const judged = judgeRequestFault(classified, shape, shapes, judgedAt, input.sourceName, recordedAt);
    verdict = judged.verdict;
    deps.metrics?.request(input.sourceName, key, verdict.kind, x.latencyMs / 1000);
    if (lease?.aborted && !deadline.aborted && verdict.kind === 'transient') {
      verdict = {
        ...verdict,
        reason: `probe stopped before its lease ended (${Math.round(x.latencyMs)} ms): ${verdict.reason}`,
      };
    }
    if (verdict.kind === 'success') shapes.succeeded(shape, now());
    // A good tile's URL is the entity's self-probe (a URL this worker fetches anyway). The spec is stored in the
    // entity's history: a source with credentials or extra headers is named by its sources file instead, and the
    // probe reads them there on the worker (without a sources file, it gets no self-probe).
    if (verdict.kind === 'success' && decision) {
      const plain = !source.auth && !Object.keys(source.headers).length;
      if (plain) deps.guard!.learnProbe?.(key, unit.url, source.userAgent);
      else if (input.sourcesFile !== undefined)
        deps.guard!.learnProbe?.(key, unit.url, source.userAgent, { file: input.sourcesFile, name: input.sourceName });
    }
    // A configuration error says nothing about the endpoint's health: never counted toward the host's breaker.
    const counted = judged.configError ? 'neutral' : verdict.kind;
    if (decision)
      deps.guard!.release(decision, {
        kind: counted,
        latencyMs: verdict.latencyMs,
        ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
      });
    if (verdict.kind === 'success' && chunk) {
      const v = verdict;
      answered();
      const file = await store.putChunk(input.sourceName, tiles[0]!.z, unit, x.body, source.format);
      await markServed(shapes, stores, input.sourceName, shape, now());
      const m = unit.meta!;
      return each((t, k) => ({
        ...t,
        status: 'ok',
        kind: 'success',
        reason: `${v.reason}, kept whole (${tiles.length} tiles)`,
        attempts: tried.made,
        httpStatus: v.httpStatus,
        bytes: x.body.length,
        latencyMs: v.latencyMs,
        path: file,
        region: { left: m.left + m.cells[k]![0] * source.tileSize, top: m.top + m.cells[k]![1] * source.tileSize },
      }));
    }
    if (verdict.kind === 'success') {
      const v = verdict;
      answered();
      const bodies = unit.meta ? await cutMetatile(v.pixels!, unit.meta, source.tileSize, source.format) : [x.body];
      const meta = {
        fetchedAt: Date.now(),
        contentType: unit.meta ? source.format : (x.headers['content-type'] ?? source.format),
        ...(!unit.meta && x.headers['etag'] ? { etag: x.headers['etag'] } : {}),
        ...(!unit.meta && x.headers['last-modified'] ? { lastModified: x.headers['last-modified'] } : {}),
        width: source.tileSize,
        height: source.tileSize,
      };
      const saved = await Promise.all(tiles.map((t, k) => store.put(input.sourceName, t, bodies[k]!, meta)));
      await markServed(shapes, stores, input.sourceName, shape, now());
      const reason = unit.meta ? `${v.reason}, cut into ${tiles.length} tiles` : v.reason;
      return each((t, k) => ({
        ...t,
        status: 'ok',
        kind: 'success',
        reason,
        attempts: tried.made,
        httpStatus: v.httpStatus,
        bytes: saved[k]!.bytes,
        latencyMs: v.latencyMs,
        path: saved[k]!.path,
      }));
    }
    if (verdict.kind === 'neutral' && !verdict.configError) {
      const v = verdict;
      return each((t) => ({
        ...t,
        status: 'hole',
        kind: 'neutral',
        reason: scrubSecrets(v.reason, secrets),
        attempts: tried.made,
        httpStatus: v.httpStatus,
      }));
    }
    const tooLong = (verdict.retryAfterMs ?? 0) > policy.maxRetryAfterMs;
    if (!retryable(verdict.kind) || attempt === policy.attempts || tooLong || signal?.aborted) break;
    // Under the breaker a Retry-After is the guard's pause, the fleet's (waited out above, before the next
    // decision); without one, this call waits it out itself.
    const pausedByGuard = useBreaker && deps.guard!.waitOutPause !== undefined;
    await sleep(backoffMs(attempt - 1, policy, pausedByGuard ? 0 : (verdict.retryAfterMs ?? 0)), signal);
  }
  const v = verdict!;
  const redacted = redactUrl(url, source.auth);
  // A failed metatile fails every tile of it, with the same reason.
  const failed = each((t) => ({
    ...t,
    status: v.kind === 'rate-limited' && v.retryAfterMs !== undefined ? 'deferred' : 'failed',
    kind: v.kind,
    // A server may quote the request back (a ServiceException, an error page): never the credential.
    reason: scrubSecrets(
      `${v.configError && !v.reason.startsWith('configuration error') ? 'configuration error: ' : ''}${v.reason} (${redacted})`,
      secrets,
    ),
    attempts: tried.made,
    httpStatus: v.httpStatus,
    bytes: v.bytes,
    latencyMs: v.latencyMs,
    ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}),
    ...(v.configError ? { configError: true } : {}),
  }));
  // Not for the request's own faults (permanent, configuration): those need fixing, not hiding.
  if (v.configError || !CURABLE_KINDS.has(v.kind)) return failed;
  // A tile the source failed to serve after its retries goes to the mirrors as a refused one does.
  const mirrored = await fromMirrors(
    deps,
    store,
    input,
    tiles,
    policy,
    signal,
    scrubSecrets(`${v.reason} after ${tried.made} attempts`, secrets),
  );
  if (mirrored === null) return null;
  // `stale` means stale: a tile the server failed to render now is drawn from its last good copy too, as a
  // refused one is.
  const stored = await staleCopies(store, input, tiles, mirrored);
  return failed.map((r, k) => {
    const mirror = mirrored[k];
    if (mirror) return servedOrRefused(mirror, r);
    const copy = stored[k];
    return copy
      ? {
          ...r,
          status: 'stale',
          reason: `${r.reason}; served the copy fetched ${new Date(copy.meta.fetchedAt).toISOString()}`,
          path: copy.path,
          bytes: copy.meta.bytes,
        }
      : r;
  });
}

/** What the last failed request got, and where it went (credentials masked), for a record that goes on past it. */
function lastReason(
  v: Verdict,
  attempt: number,
  url: string,
  source: SourceConfig,
  secrets: readonly string[],
): string {
  return scrubSecrets(`attempt ${attempt}: ${v.reason} (${redactUrl(url, source.auth)})`, secrets);
}

/**
 * A tile the breaker stopped: refused before a request (`made` empty), refused before a retry, or abandoned in
 * flight (`made`: what the last request made got). The pipeline's fallback applies either way.
 */
/**
 * Tiles the source's breaker refused, each from the first mirror that serves it good: a mirror is fetched as a
 * source of its own (its breaker, retries, validation, its folder of the tile store), so its failures count
 * against it, never against the primary. Null where no mirror served the tile (every tile, for a source with
 * no mirrors); null for all when cancelled.
 */
async function fromMirrors(
  deps: FetchDeps,
  store: Tiles,
  input: FetchBatchInput,
  tiles: TileAddress[],
  policy: RetryPolicy,
  signal: AbortSignal | undefined,
  why: string,
): Promise<(TileResult | null)[] | null> {
  const out: (TileResult | null)[] = tiles.map(() => null);
  for (const m of input.mirrors ?? []) {
    const left = out.flatMap((r, k) => (r ? [] : [k]));
    if (!left.length) break;
    const mirrorInput: FetchBatchInput = {
      ...input,
      sourceName: m.name,
      source: m.source,
      tiles: left.map((k) => tiles[k]!),
      whenRefused: 'defer',
      conditional: false,
      mirrors: [],
    };
    for (const unit of requestUnits(m.source, mirrorInput.tiles)) {
      const got = await requestUnit(
        deps,
        { store, ledger: null },
        mirrorInput,
        unit,
        sourceBreakerKey(m.source),
        input.breaker !== false && deps.guard !== undefined,
        policy,
        () => undefined,
        signal,
        { made: 0 },
      );
      if (got === null) return null;
      unit.members.forEach((j, n) => {
        const r = got[n]!;
        if (r.status === 'ok')
          out[left[j]!] = {
            ...r,
            tier: `mirror:${m.name}`,
            reason: `${why}; served by mirror ${JSON.stringify(m.name)}: ${r.reason}`,
          };
      });
    }
  }
  return out;
}

/**
 * A mirror's tile where it served one, else the primary's record. The mirror's record counts the primary's
 * requests too and keeps the breaker's part (the state that stopped the primary, a call it abandoned).
 */
function servedOrRefused(mirror: TileResult | null | undefined, primary: TileResult): TileResult {
  if (!mirror) return primary;
  return {
    ...mirror,
    attempts: primary.attempts + mirror.attempts,
    ...(primary.breakerState !== undefined ? { breakerState: primary.breakerState } : {}),
    ...(primary.abandonedAfterMs !== undefined ? { abandonedAfterMs: primary.abandonedAfterMs } : {}),
  };
}

/**
 * The last good copies of the tiles no mirror served, read only when they are needed: under the stale
 * fallback, after the mirrors had their turn.
 */
function staleCopies(
  store: Tiles,
  input: FetchBatchInput,
  tiles: TileAddress[],
  mirrored: readonly (TileResult | null)[],
): Promise<(Awaited<ReturnType<Tiles['get']>> | null)[]> {
  if (input.whenRefused !== 'stale') return Promise.resolve([]);
  return Promise.all(tiles.map((t, k) => (mirrored[k] ? Promise.resolve(null) : store.get(input.sourceName, t))));
}

function refused(
  input: FetchBatchInput,
  tile: TileAddress,
  d: Extract<GuardDecision, { kind: 'refused' }>,
  stored: Awaited<ReturnType<Tiles['get']>>,
  attempts: number,
  made: Pick<TileResult, 'kind' | 'httpStatus' | 'latencyMs' | 'abandonedAfterMs'> = {},
): TileResult {
  const base = {
    ...tile,
    attempts,
    ...made,
    breakerState: d.state,
    ...(d.retryAfterMs !== null ? { retryAfterMs: d.retryAfterMs } : {}),
  };
  if (input.whenRefused === 'stale' && stored) {
    return {
      ...base,
      status: 'stale',
      reason: `${d.reason}; served the copy fetched ${new Date(stored.meta.fetchedAt).toISOString()}`,
      path: stored.path,
      bytes: stored.meta.bytes,
    };
  }
  if (input.whenRefused === 'hole')
    return { ...base, status: 'hole', reason: `${d.reason}; left as a hole (not rendered)` };
  return {
    ...base,
    status: 'deferred',
    reason: `${d.reason}${input.whenRefused === 'stale' ? '; no stored copy to serve' : ''}`,
  };
}

/**
 * Refresh mode, or a retry: the unit's tiles as the store holds them, when every one was fetched at or after
 * `since` (a metatile is kept only whole, as it is fetched whole). True when they were recorded ok with no
 * request, `why` in their reason.
 */
async function keptFresh(
  store: Tiles,
  input: FetchBatchInput,
  members: number[],
  since: number,
  results: (TileResult | null)[],
  why: string,
): Promise<boolean> {
  let stored: (StoredTile | null)[];
  try {
    stored = await Promise.all(members.map((i) => store.get(input.sourceName, input.tiles[i]!)));
  } catch {
    // A folder that leads out of the store, an unreadable file: fetched instead, where the store's write says why.
    return false;
  }
  // A copy of another size (the source's tileSize changed since) is not this source's tile.
  const fits = (s: StoredTile) =>
    s.meta.width === undefined || (s.meta.width === input.source.tileSize && s.meta.height === input.source.tileSize);
  if (!stored.every((s) => s !== null && s.meta.fetchedAt >= since && fits(s))) return false;
  members.forEach((i, k) => {
    const s = stored[k]!;
    results[i] = {
      ...input.tiles[i]!,
      status: 'ok',
      reason: `kept: in the store since ${new Date(s.meta.fetchedAt).toISOString()}, ${why}`,
      attempts: 0,
      path: s.path,
      bytes: s.meta.bytes,
    };
  });
  return true;
}

/**
 * A 304 confirmed the stored copy: it counts as fetched now, so the next refresh keeps it. Only the very copy
 * the request named (the store still gives it, with the same content), so a newer one another writer stored
 * meanwhile is never overwritten with the old; and only as a courtesy: if it cannot be done, the tile is still ok.
 */
async function renew(store: Tiles, sourceName: string, t: TileAddress, stored: StoredTile, at: number): Promise<void> {
  try {
    const now = await store.get(sourceName, t);
    if (now?.path !== stored.path || now.meta.sha256 !== stored.meta.sha256) return;
    const body = await storageFor(now.path).read(now.path);
    if (!body || createHash('sha256').update(body).digest('hex') !== stored.meta.sha256) return;
    const { etag, lastModified, width, height, contentType } = stored.meta;
    await store.put(sourceName, t, body, {
      fetchedAt: at,
      contentType,
      ...(etag !== undefined ? { etag } : {}),
      ...(lastModified !== undefined ? { lastModified } : {}),
      ...(width !== undefined ? { width } : {}),
      ...(height !== undefined ? { height } : {}),
    });
  } catch {
    // The next refresh asks again.
  }
}

/** Waits `ms`, or less if `signal` aborts. The abort listener goes when the timer fires: a batch retries many times on one signal. */
/** Node's own abortable timer (it removes its abort listener when it fires): resolves early on abort. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, signal ? { signal } : {}).catch(() => undefined);
}
