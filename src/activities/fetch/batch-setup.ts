/** Setting a fetch batch up: where it stores, what it resumes from, what it checks, and which requests it makes. */
import path from 'node:path';
import type { Context } from '@temporalio/activity';
import type { TileAddress } from '../../sources/request-url';
import { activityContext } from '../activity-context';
import { confineLocation } from '../confine/confine-location';
import { checkCredentialedSource } from '../confine/credentialed-source';
import type { WorkerRoots } from '../confine/roots';
import { openTileStore } from '../tile-store/open-store';
import { servedLedgerRoot } from '../tile-store/served-ledger';
import { isObjectUrl, locationWithin } from '../storage/location';
import {
  sourceBreakerKey,
  type BatchResume,
  type FetchBatchInput,
  type FetchDeps,
  type TileResult,
} from './batch-types';
import { attemptLease, type HeartbeatLease } from './heartbeat-lease';
import { requestUnits, type RequestUnit } from './metatiles';
import { DEFAULT_RETRY, type RetryPolicy } from './retry-policy';
import type { ServedRecords } from './served-records';

/** A batch's call: what it runs on, its input, and what its caller keeps of it. */
export interface BatchArgs {
  deps: FetchDeps;
  input: FetchBatchInput;
  resume: BatchResume;
}

/** A batch set up to run. */
export interface Batch extends BatchArgs {
  /** The running activity's context; undefined outside one (the `tile` command, benchmarks). */
  ctx: Context | undefined;
  policy: RetryPolicy;
  /** One per tile, in input order: null until the tile is finished (resumed ones are from the start). */
  results: (TileResult | null)[];
  /** The tile store, and the source's ledger (null without roots, or refused). */
  served: ServedRecords;
  /** The source's breaker key. */
  key: string;
  useBreaker: boolean;
  /**
   * Whether the server still takes this attempt's heartbeats: cut off for longer than its heartbeat timeout,
   * its batch may already run again elsewhere, so it starts no further request (heartbeat-lease.ts).
   */
  lease: HeartbeatLease | null;
  /** A unit whose tiles the store all holds fetched at or after this (epoch ms) is kept, not requested. */
  keepSince: number | undefined;
  /** Why such a unit is kept, for its tiles' reason. */
  keepWhy: string;
  /** The requests to make: for the tiles not finished yet. */
  units: RequestUnit[];
}

/** Sets a batch up: confines and opens its stores, resumes its finished tiles, checks its credentials. */
export async function setUpBatch({ deps, input, resume }: BatchArgs): Promise<Batch> {
  const ctx = activityContext();
  const beaten = (ctx?.info.heartbeatDetails as { results?: (TileResult | null)[] } | undefined)?.results;
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...input.retry };
  const storeRoot = deps.roots
    ? await confineLocation(input.storeRoot, deps.roots, 'storeRoot', 'fetch batch')
    : input.storeRoot;
  const results = resumedResults({ tiles: input.tiles, storeRoot, beaten, resumed: resume.resumed });
  if (deps.roots) await checkCredentials(input, deps.roots);
  const served = await openServed(storeRoot, deps.roots);
  const key = sourceBreakerKey(input.source);
  const useBreaker = input.breaker !== false && deps.guard !== undefined;
  const lease = attemptLease(ctx, deps.now ?? Date.now);
  // A retry also keeps what an earlier attempt of this batch stored but did not record (killed, or cut off,
  // between storing a tile and its checkpoint): a tile the store holds from since the batch was scheduled is
  // not asked of the server again. Refresh mode keeps more.
  const retrySince = ctx && ctx.info.attempt > 1 ? ctx.info.scheduledTimestampMs : undefined;
  const keepSince = input.keepFetchedSince ?? retrySince;
  const keepWhy =
    input.keepFetchedSince !== undefined ? 'within the refresh age' : 'stored by an earlier attempt of this batch';
  const units = unitsToRequest(input, results);
  return { deps, input, resume, ctx, policy, results, served, key, useBreaker, lease, keepSince, keepWhy, units };
}

/** What a batch may resume from: its tiles, its store, its heartbeat's results and its caller's checkpoint. */
interface ResumeFrom {
  tiles: TileAddress[];
  storeRoot: string;
  beaten: readonly (TileResult | null)[] | undefined;
  resumed: readonly (TileResult | null)[] | undefined;
}

/** The results an earlier attempt recorded that still hold, position by position (null where none). */
function resumedResults({ tiles, storeRoot, beaten, resumed }: ResumeFrom): (TileResult | null)[] {
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
  const heartbeat = beaten && beaten.length === tiles.length ? beaten : [];
  const checkpoint = resumed?.length === tiles.length ? resumed : [];
  // The union: the checkpoint is the fresher of the two (written as tiles finish, not every 1.5 s).
  return tiles.map((t, i) => fromStore(checkpoint[i], t) ?? fromStore(heartbeat[i], t));
}

/** On a worker: the source's and each mirror's credentials only as the operator's sources file pairs them. */
async function checkCredentials(input: FetchBatchInput, roots: WorkerRoots): Promise<void> {
  await checkCredentialedSource(input.source, input.sourceName, input.sourcesFile, roots, 'fetch batch');
  // A mirror sends its credentials as the source does: only as the operator's sources file pairs them.
  for (const m of input.mirrors ?? [])
    await checkCredentialedSource(m.source, m.name, input.sourcesFile, roots, 'fetch batch');
}

/** Opens the tile store and the source's ledger of served records. */
async function openServed(storeRoot: string, roots: WorkerRoots | undefined): Promise<ServedRecords> {
  const store = openTileStore(storeRoot);
  // The served records that follow the source across outputs (served-ledger.ts); none without roots.
  // Confined as the store is (a symlink planted there must not lead out of the roots); refused, it is not kept.
  const ledgerAt = roots ? servedLedgerRoot(storeRoot, roots) : null;
  const ledgerRoot =
    ledgerAt === null || !roots
      ? null
      : await confineLocation(ledgerAt, roots, 'served records', 'fetch batch').catch(() => null);
  return { store, ledger: ledgerRoot === null ? null : openTileStore(ledgerRoot) };
}

/**
 * One request per unit: a tile, or the tiles of one metatile (WMS sources with `metatile`). Only the tiles not
 * finished yet (a resumed batch): a metatile partly done before is fetched for the rest.
 */
function unitsToRequest(input: FetchBatchInput, results: readonly (TileResult | null)[]): RequestUnit[] {
  const pending = input.tiles.map((_, i) => i).filter((i) => !results[i]);
  return requestUnits(
    input.source,
    pending.map((i) => input.tiles[i]!),
  ).map((u) => ({ ...u, members: u.members.map((k) => pending[k]!) }));
}
