/** What a fetch batch is given, what it gives back per tile, and what it runs on. */
import { breakerKey, type BreakerStateName, type OutcomeKind } from '../../breaker';
import type { TileAddress } from '../../sources/request-url';
import type { SourceConfig } from '../../sources/schema';
import type { BreakerGuard } from '../guard';
import type { EndpointPools } from '../http/endpoint-pool';
import type { ShapeMemory } from '../validate/shape-memory';
import type { RetryPolicy } from './retry-policy';
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
