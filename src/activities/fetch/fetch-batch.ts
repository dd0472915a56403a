import type { TileAddress } from '../../sources/request-url';
export { probeBoundMs } from '../guard/probe-bound';
import { requestUnits } from './metatiles';
import type { GuardDecision } from '../guard';
import { openTileStore } from '../store/open-store';
import { servedLedgerRoot } from '../store/served-ledger';
import { processShapes, requestShape } from '../validate/shape-memory';
import { DEFAULT_RETRY, type RetryPolicy } from './retry-policy';
import { activityContext } from '../activity-context';
import { ApplicationFailure } from '@temporalio/common';
import { attemptLease } from './heartbeat-lease';
import { confineLocation } from '../confine/confine-location';
import { isObjectUrl, locationWithin } from '../storage/location';
import path from 'node:path';
import { checkCredentialedSource } from '../confine/credentialed-source';
import {
  sourceBreakerKey,
  type BatchResume,
  type FetchBatchInput,
  type FetchDeps,
  type TileResult,
} from './batch-types';
import { keptFresh } from './kept-fresh';
import { fetchUnit } from './request-unit';
import { recordOf, type ServedRecords } from './served-records';
import { sleep } from './sleep';
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
        if (
          keepSince !== undefined &&
          (await keptFresh({ store, input, members: unit.members, since: keepSince, results, why: keepWhy }))
        ) {
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
          const out = await fetchUnit({
            deps,
            stores: served,
            input,
            unit,
            key,
            useBreaker,
            policy,
            onDecision,
            signal: ctx?.cancellationSignal,
            tried: { made: 0 },
            answered,
          });
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
