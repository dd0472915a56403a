/**
 * The mosaic's messages: what a user asks for, the plan the planning activity returns, what the workflows
 * keep in their histories (small: counts and tile indices, never per-tile records) and what they report.
 * Types, and the few pure helpers on them, shared by workflows, activities and the CLI.
 */
import type { BreakerStateName, OutcomeKind } from '../breaker';
import type { SourceConfig, SourceInput } from '../sources/schema';
import type { Capability } from './locations';
import type { Coverage } from '../geo/coverage';

/** What happens to a tile the breaker refuses, decided before the run. */
export type FallbackPolicy = 'fail-fast' | 'stale' | 'hole' | 'wait';
/** After a `wait` policy's deadline. */
export type AfterDeadline = Exclude<FallbackPolicy, 'wait'>;

/** The statuses of the manifest: every planned tile ends with exactly one (`outside`: beyond the request's coverage, never fetched). */
export const MANIFEST_STATUSES = ['ok', 'stale', 'hole', 'dead-lettered', 'failed', 'outside'] as const;
export type ManifestStatus = (typeof MANIFEST_STATUSES)[number];
export type StatusCounts = Record<ManifestStatus, number>;

/** A mosaic as a user asks for it (validated by `parseMosaicRequest`, which names the field and value). */
export interface MosaicRequest {
  /** A sources file (YAML or JSON) and the source's name in it, or an inline `source`. */
  sourcesFile?: string;
  sourceName?: string;
  source?: SourceInput;
  /**
   * west, south, east, north in `crs`: EPSG:4326 (the default), EPSG:3857, or the CRS of the source's grid.
   * Optional with a `coverage`, whose bounds it then is.
   */
  bbox?: [number, number, number, number];
  /**
   * Only the tiles that overlap this area are fetched (the others are recorded `outside`): a GeoJSON Polygon
   * or MultiPolygon, or a Feature or FeatureCollection of them, in `crs`; at most 20,000 positions.
   */
  coverage?: unknown;
  crs?: string;
  zoom: number;
  /** The mosaic's GeoTIFF path; the manifest, mask and sidecars go beside it. */
  output: string;
  /** Also write these beside the TIFF (each with a world file). */
  extraFormats?: ('png' | 'webp')[];
  /**
   * Write the TIFF's sidecars (`.aux.xml`, world file, `.prj`) beside it. Default true. The TIFF is a Cloud
   * Optimized GeoTIFF with its georeferencing inside, so false leaves it alone; the PNG/WebP copies and the
   * mask keep theirs, their only georeferencing.
   */
  sidecars?: boolean;
  /**
   * Stitch the TIFF (default true). false: the tiles go to the tile store, with the manifest and the mask,
   * and no image is made (what `seed` does per level).
   */
  image?: boolean;
  fallback?: FallbackPolicy;
  afterDeadline?: AfterDeadline;
  /** ISO-8601 instant, or a duration from the start such as `90m`, `2h`, `45s`. */
  deadline?: string;
  /** Refuse plans larger than this. */
  maxTiles?: number;
  /** The tile store (default: `<output>.tiles`). */
  storeRoot?: string;
  /**
   * Refresh mode: an age (`7d`, `12h`) or an ISO-8601 instant. A tile the store holds that was fetched (or
   * confirmed unchanged) after it is kept as it is, with no request; an older one is fetched again, with
   * If-None-Match / If-Modified-Since when the store kept the server's validators. Absent: every tile is fetched.
   */
  refreshBefore?: string;
  /** Tiles per fetch activity. */
  batchSize?: number;
  /** Tiles per child workflow (a job larger than this runs one child per block). */
  blockTiles?: number;
  /** Fetch activities in flight per block. */
  parallelBatches?: number;
  /** Go through the fleet-wide breaker (default true). */
  breaker?: boolean;
  /**
   * WMS only: request the area in large chunks (2048 px square, or the server's maxRequestSize, keeping the
   * source's metatile buffer) and stitch the chunks, with no tile cache (so `stale` has nothing to serve).
   */
  directChunks?: boolean;
  /** What the worker must be able to do (set by the client for `s3://` locations; see capabilitiesFor). */
  requires?: Capability[];
  /** A mosaic, block or re-drive run continues as new once its history holds this many events (200-8,000; default 2,000). */
  eventsPerRun?: number;
}

/** How long a re-drive waits for its breaker to let the dead letters through, unless told otherwise. */
export const DEFAULT_REDRIVE_WAIT_MS = 30 * 60_000;

/** A sources file read again for a re-drive (a URL or credential fixed since the mosaic ran). */
export interface RedriveSources {
  sourcesFile: string;
  /** Needed when the file has more than one source. */
  sourceName?: string;
}

/** The tile grid: columns xMin..xMax, rows yMin..yMax (XYZ, from the top) at zoom z; tile i is row-major. */
export interface TileGrid {
  z: number;
  xMin: number;
  xMax: number;
  yMin: number;
  yMax: number;
  tileSize: number;
}

/** Everything a run needs, resolved once by the planning activity (no credentials: env var names only). */
export interface MosaicPlan {
  sourceName: string;
  source: SourceConfig;
  /** The sources file the source was read from (its real path): a source with credentials is checked against it. */
  sourcesFile?: string;
  grid: TileGrid;
  total: number;
  /** Bounds of the whole grid (what the TIFF covers): EPSG:3857, or `crs`, the source grid's. */
  bounds: { minX: number; minY: number; maxX: number; maxY: number; crs?: string };
  output: string;
  extraFormats: ('png' | 'webp')[];
  /** The TIFF's sidecars are written (plans made before the choice have none: true). */
  sidecars?: boolean;
  /** false: no image is stitched, only the manifest and the mask (absent: the image is made). */
  image?: boolean;
  /** `<output>.work`: the plan a re-drive reads, and the journals. */
  workDir: string;
  /** This run's batch journals (per-tile records, read by the assembly): one folder per mosaic run, so a
   * second run on the same output never mixes with the first's records. Re-drives add to it. */
  journalDir: string;
  storeRoot: string;
  /** Refresh mode (epoch ms): stored tiles fetched at or after this are kept; absent, every tile is fetched. */
  refreshBefore?: number;
  /** The request's coverage in the plan's CRS: tiles it does not overlap are recorded `outside`, not fetched. */
  coverage?: Coverage;
  fallback: FallbackPolicy;
  afterDeadline: AfterDeadline;
  /** Absolute deadline (epoch ms), or null. */
  deadlineAt: number | null;
  batchSize: number;
  blockTiles: number;
  parallelBatches: number;
  breaker: boolean;
  /** Metatile responses kept whole and stitched from (no tile cache). */
  directChunks?: boolean;
  /**
   * The fetch task queue (`<task queue>-fetch`) when a worker polled it at planning time, and how long a batch
   * may wait there before it runs on the workflow's own queue instead. Absent: batches go to the workflow's
   * own queue (no worker served the fetch queue, or a plan made before it existed).
   */
  fetchQueue?: FetchQueueChoice;
  /** What a worker must be able to do to act on this plan (`object-storage` for `s3://` locations). */
  requires?: Capability[];
  /** A run continues as new once its history holds this many events (absent: the default, 2,000). */
  eventsPerRun?: number;
  /**
   * The source's mirrors, in its order, each with its contract as judged at planning: a tile the primary's
   * breaker refuses is served by the first usable one whose own breaker lets it through (docs/sources.md).
   */
  mirrors?: MirrorPlan[];
}

/** A mirror of the plan's source and whether its contract holds (src/activities/mirror/). */
export interface MirrorPlan {
  name: string;
  source: SourceConfig;
  /** It may serve tiles: the same grid, a decoded format, and tiles measured to agree with the primary's. */
  usable: boolean;
  /** Why it is not used, or what its agreement rests on. */
  reason: string;
  /** The measured agreement with the primary on sample tiles (absent when the grid or format already refused it). */
  agreement?: MirrorAgreement;
}

export interface MirrorAgreement {
  tiles: number;
  /** Mean absolute difference per channel (0-255) over the sample tiles, and the worst tile's. */
  meanAbsDiff: number;
  maxMeanAbsDiff: number;
  /** Share of 4 x 4 blocks whose means differ by more than the tolerance's threshold, mean and worst tile. */
  differingShare: number;
  maxDifferingShare: number;
  /** When it was measured (ISO 8601): at this planning, or recorded in the tile store by an earlier one. */
  measuredAt: string;
}

/** Where a plan's fetch batches go, decided when it is made (see src/workflows/mosaic-block.ts). */
export interface FetchQueueChoice {
  taskQueue: string;
  /** The schedule-to-start timeout of a batch there; then it runs on the workflow's own queue. */
  startWithinMs: number;
}

/** A contiguous run of tile indices, or an explicit list (re-fetches, re-drives). */
export type TileSelection = { start: number; count: number } | { indices: number[] };

export const selectionSize = (t: TileSelection): number => ('indices' in t ? t.indices.length : t.count);

export const selectionIndices = (t: TileSelection): number[] =>
  'indices' in t ? t.indices : Array.from({ length: t.count }, (_, k) => t.start + k);

export type WhenRefusedMode = 'defer' | 'stale' | 'hole';

export interface MosaicBatchInput {
  plan: MosaicPlan;
  tiles: TileSelection;
  /** Orders journals: a later pass's record of a tile replaces an earlier one. */
  pass: number;
  /** Journal name, unique per batch and pass. */
  batchId: string;
  whenRefused: WhenRefusedMode;
  /** Tiles still deferred after this pass are dead-lettered (not waited for again). */
  final: boolean;
  /**
   * Record only: the source has a configuration error (this message): no request is made, and every tile of
   * the selection (up to the plan's blockTiles) is recorded `failed` with it, so the manifest accounts for it.
   */
  configError?: string;
}

/** What a batch returns to the workflow: counts, and the tiles to wait for (indices). */
export interface MosaicBatchSummary {
  counts: StatusCounts;
  /** Tiles refused (or rate-limited) and not final: the workflow waits and fetches them again. */
  deferred: number[];
  /** The longest retryAfter among the deferred tiles (ms), or null. */
  retryAfterMs: number | null;
  /** Breaker states that refused tiles in this batch. */
  breakerStates: BreakerStateName[];
  requests: number;
  /** A tile of the batch failed with a configuration error (its reason): the source needs fixing, not retrying. */
  configError?: string;
}

/** One tile's line in the manifest. */
export interface ManifestTile {
  i: number;
  z: number;
  x: number;
  y: number;
  status: ManifestStatus;
  /**
   * The outcome kind of the tile's last request, from whichever pass made it; absent when no request was ever
   * made. Present beside `breakerState` when the breaker refused a retry or a later pass, or abandoned the call.
   */
  kind?: OutcomeKind;
  reason: string;
  attempts: number;
  /** The last request's HTTP status (null: no response), from whichever pass made it. */
  httpStatus?: number | null;
  /** The breaker state that refused the tile's request (or abandoned its call in flight). */
  breakerState?: BreakerStateName;
  /** The last request was in flight this long (ms) when the breaker opened and abandoned it. */
  abandonedAfterMs?: number;
  retryAfterMs?: number;
  /** The pass that decided it (0: first fetch; more for waits and re-drives). */
  pass: number;
  /** Failed because the source is misconfigured (a wrong layer, credentials), not because the server failed. */
  configError?: true;
  /** The stored tile drawn into the mosaic (ok and stale tiles, gaps drawn from an earlier copy), or the chunk holding it at `region`. */
  path?: string;
  /** A gap (dead-lettered or failed) drawn from its last good copy in the tile store, fetched then (ISO 8601). */
  earlierCopyFetchedAt?: string;
  region?: { left: number; top: number };
  /** Who served it: the source (`primary`), one of its mirrors, a stale copy or a hole; absent for a tile not served. */
  tier?: 'primary' | `mirror:${string}` | 'stale' | 'hole';
}

/** What the assembly activity is asked for. */
export interface AssembleInput {
  plan: MosaicPlan;
  /** The run stopped early (cancelled or failed): tiles no batch recorded are listed as not fetched. */
  partial: boolean;
  /** Why the run stopped early, for the manifest. */
  stoppedBecause?: string;
  /** The workflow that built it, for the manifest. */
  workflowId?: string;
}

/** A mosaic's dead-lettered tiles, as a re-drive reads them. */
export interface DeadLetters {
  plan: MosaicPlan;
  /** The dead-lettered tiles (and the failed ones, when the source is read again), ascending. */
  indices: number[];
  /** Not before this instant (epoch ms): the latest breaker retryAfter among them, from when it was given. */
  notBefore: number;
  /** The pass a re-drive runs as (after every pass so far). */
  nextPass: number;
}

export interface MosaicProgress {
  total: number;
  done: number;
  counts: StatusCounts;
  phase: 'planning' | 'fetching' | 'waiting' | 'assembling' | 'done' | 'cancelled' | 'failed';
  /** Estimated seconds left for the fetch, or null. */
  etaSeconds: number | null;
  /** Child workflows running now (their own `progress` queries hold their live counts). */
  runningBlocks: string[];
  /** Breaker states seen refusing tiles so far. */
  breakerStates: BreakerStateName[];
  /** The breakers this mosaic goes through (their entities answer `view` and `status`). */
  breakerKeys: string[];
  waitingUntil: number | null;
  /**
   * While a `wait` pass sleeps on a breaker that refused its tiles: which breaker, in which state, and the
   * wait's deadline (after it, tiles still refused get the after-deadline fallback). Absent from workflows
   * that started before it existed.
   */
  waitingFor?: { key: string; state: BreakerStateName; deadlineAt: number | null } | null;
}

export interface MosaicResult {
  total: number;
  counts: StatusCounts;
  output: string;
  files: string[];
  manifest: string;
  mask: string;
  partial: boolean;
  /** A tile failed with a configuration error (the first such reason): the source needs fixing (exit 4). */
  configError?: string;
  /** Gaps drawn from their last good copy in the tile store (their tiles keep their status: a re-drive fetches them). */
  earlierCopies?: number;
}

/** Every tile served fresh, except those outside the coverage (results from before coverages have no `outside`). */
export function allServed(r: Pick<MosaicResult, 'counts' | 'total'>): boolean {
  return r.counts.ok + (r.counts.outside ?? 0) === r.total;
}

export function zeroStatusCounts(): StatusCounts {
  return { ok: 0, stale: 0, hole: 0, 'dead-lettered': 0, failed: 0, outside: 0 };
}
