/**
 * A mosaic request as a user gives it, checked field by field: pure and Node-free, so a client validates a
 * request before it starts anything (without loading the planner, which reads files and images) and the
 * planner validates it again on the worker with the sources file as it is then.
 */
import { z } from 'zod';
import { parseOrThrow } from '../breaker/config-error';
import { MAX_ZOOM, ORIGIN_SHIFT_M } from '../geo/mercator';
import { sourceNameSchema } from '../sources/schema';
import { durationMs, UNIT_MS } from './duration';
import { CAPABILITIES } from './locations';
import { coverageSchema } from './coverage';
import { coverageBounds, type Coverage } from '../geo/coverage';
import {
  MAX_BATCH_SIZE,
  MAX_BATCHES_PER_BLOCK,
  MAX_EVENTS_PER_RUN,
  MAX_PLAN_TILES,
  MIN_EVENTS_PER_RUN,
} from './plan-check';

const MAX_BLOCKS = 4_096;
/**
 * Tiles per fetch activity unless asked otherwise. Each batch costs six history events (scheduled, started,
 * completed and the workflow task that follows), so 512 (was 256) halves what a healthy mosaic's batches add
 * to its history; one batch still fills a worker's connections to the source, and its heartbeat stays well
 * under Temporal's payload limit.
 */
export const DEFAULT_BATCH_SIZE = 512;
/** A wait longer than this is a forgotten job, not a plan (and a history that keeps growing). */
export const MAX_DEADLINE_MS = 7 * UNIT_MS.d;

/** A date, or a date and time with an optional zone: 2026-12-01, 2026-12-01T02:00Z, 2026-12-01T02:00:00.000+01:00. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

const finite = z.number().refine(Number.isFinite, 'must be a finite number');

const requestFields = z
  .object({
    sourcesFile: z.string().min(1).optional(),
    sourceName: sourceNameSchema.optional(),
    source: z.unknown().optional(),
    bbox: z.tuple([finite, finite, finite, finite]).optional(),
    // Only the tiles inside it are fetched; the bbox defaults to its bounds.
    coverage: coverageSchema.optional(),
    // EPSG:4326 or EPSG:3857; or the CRS of the source's own grid.
    crs: z
      .string()
      .regex(/^EPSG:\d{4,6}$/, 'must be an EPSG code: EPSG:4326 (degrees), EPSG:3857, or the CRS of the source grid')
      .default('EPSG:4326'),
    zoom: z.number().int().min(0).max(MAX_ZOOM),
    output: z.string().regex(/\.tiff?$/i, 'must be a path ending in .tif or .tiff'),
    extraFormats: z.array(z.enum(['png', 'webp'])).default([]),
    sidecars: z.boolean().default(true),
    image: z.boolean().default(true),
    fallback: z.enum(['fail-fast', 'stale', 'hole', 'wait']).default('fail-fast'),
    afterDeadline: z.enum(['fail-fast', 'stale', 'hole']).default('fail-fast'),
    deadline: z
      .string()
      .refine(
        (d) => durationMs(d) !== null || !Number.isNaN(Date.parse(d)),
        'must be an ISO-8601 instant or a duration such as 90m, 2h, 1h30m, 45s',
      )
      .optional(),
    // The assembly holds a record per tile in memory: a few million at most.
    maxTiles: z.number().int().min(1).max(MAX_PLAN_TILES).default(100_000),
    storeRoot: z.string().min(1).optional(),
    // Refresh mode: a tile the store holds from after this is kept, not fetched; an older one is fetched again.
    refreshBefore: z
      .string()
      // Strictly ISO: Date.parse would take "7" (an age missing its unit) as July 2001 and keep every tile.
      .refine(
        (d) => durationMs(d) !== null || (ISO_INSTANT.test(d) && !Number.isNaN(Date.parse(d))),
        'must be an age such as 7d or 12h, or an ISO-8601 instant such as 2026-12-01T00:00:00Z',
      )
      .optional(),
    // Heartbeats carry a batch's per-tile results: keep them well under Temporal's payload limit.
    batchSize: z.number().int().min(1).max(MAX_BATCH_SIZE).default(DEFAULT_BATCH_SIZE),
    blockTiles: z.number().int().min(1).default(16_384),
    parallelBatches: z.number().int().min(1).max(64).default(4),
    breaker: z.boolean().default(true),
    directChunks: z.boolean().default(false),
    // A capability this release lacks (a later release's request) is refused here, before anything is written.
    requires: z.array(z.enum(CAPABILITIES)).max(16).optional(),
    // Each run of a long wait continues as new past this many history events.
    eventsPerRun: z.number().int().min(MIN_EVENTS_PER_RUN).max(MAX_EVENTS_PER_RUN).optional(),
  })
  .strict();

/** A request as its fields read it, before the checks that look at several fields at once. */
type RequestFields = z.output<typeof requestFields>;
type Ctx = z.RefinementCtx<RequestFields>;

const requestSchema = requestFields
  .superRefine(checkRequest)
  .transform((r) => ({ ...r, bbox: r.bbox ?? boundsOf(r.coverage!), bboxFromCoverage: r.bbox === undefined }));

/** The checks across fields: one source, an area (its box within the CRS's bounds), bounded histories, modes. */
function checkRequest(r: RequestFields, ctx: Ctx): void {
  if ((r.sourcesFile === undefined) === (r.source === undefined)) {
    ctx.addIssue({
      code: 'custom',
      path: ['source'],
      message: 'give exactly one of sourcesFile (with sourceName) and an inline source',
      input: r.source,
    });
  }
  if (r.bbox === undefined && r.coverage === undefined) {
    ctx.addIssue({ code: 'custom', path: ['bbox'], message: 'give a bbox, a coverage, or both', input: r.bbox });
    return;
  }
  // A coverage refused above has been named already.
  if (r.coverage !== undefined && !Array.isArray(r.coverage)) return;
  checkArea(r, ctx);
  checkHistoryBounds(r, ctx);
  checkModes(r, ctx);
}

/** The bbox (or, without one, the coverage's bounds): not empty or inverted, and within the CRS's bounds. */
function checkArea(r: RequestFields, ctx: Ctx): void {
  // Without a bbox the coverage's bounds are the area, and what is wrong with them is the coverage's.
  const field = r.bbox !== undefined ? 'bbox' : 'coverage';
  const box = r.bbox ?? boundsOf(r.coverage!);
  const [w, s, e, n] = box;
  if (!(w < e))
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `west must be less than east (empty or inverted box: west ${w}, east ${e})`,
      input: box,
    });
  if (!(s < n))
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `south must be less than north (empty or inverted box: south ${s}, north ${n})`,
      input: box,
    });
  const [lonMax, latMax] =
    r.crs === 'EPSG:4326' ? [180, 90] : r.crs === 'EPSG:3857' ? [ORIGIN_SHIFT_M, ORIGIN_SHIFT_M] : [Infinity, Infinity];
  if ([w, e].some((v) => Math.abs(v) > lonMax + 1e-9) || [s, n].some((v) => Math.abs(v) > latMax + 1e-9)) {
    ctx.addIssue({
      code: 'custom',
      path: [field],
      message: `must lie within ${r.crs === 'EPSG:4326' ? 'longitude -180..180 and latitude -90..90' : 'the EPSG:3857 extent ±20037508.34 m'}`,
      input: box,
    });
  }
}

/** Bounded histories: a block's batches, and a job's blocks, each stay within a few thousand events. */
function checkHistoryBounds(r: RequestFields, ctx: Ctx): void {
  if (r.blockTiles / r.batchSize > MAX_BATCHES_PER_BLOCK) {
    ctx.addIssue({
      code: 'custom',
      path: ['blockTiles'],
      message: `makes ${Math.ceil(r.blockTiles / r.batchSize)} batches of batchSize ${r.batchSize} per block, more than ${MAX_BATCHES_PER_BLOCK}; raise batchSize or lower blockTiles`,
      input: r.blockTiles,
    });
  }
  if (r.maxTiles / Math.max(r.blockTiles, r.batchSize) > MAX_BLOCKS) {
    ctx.addIssue({
      code: 'custom',
      path: ['blockTiles'],
      message: `allows ${Math.ceil(r.maxTiles / r.blockTiles)} child workflows for maxTiles ${r.maxTiles}, more than ${MAX_BLOCKS}; raise blockTiles`,
      input: r.blockTiles,
    });
  }
}

/** Modes that need another field: a refresh needs a tile cache, a wait a deadline. */
function checkModes(r: RequestFields, ctx: Ctx): void {
  if (r.refreshBefore !== undefined && r.directChunks) {
    ctx.addIssue({
      code: 'custom',
      path: ['refreshBefore'],
      message: 'needs a tile cache to keep tiles from; directChunks keeps none',
      input: r.refreshBefore,
    });
  }
  if (r.fallback === 'wait' && r.deadline === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['deadline'],
      message: 'is required when fallback is "wait" (waiting must end somewhere)',
      input: r.deadline,
    });
  }
}

/** A coverage's bounds as a bbox: west, south, east, north. */
export function boundsOf(c: Coverage): [number, number, number, number] {
  const b = coverageBounds(c);
  return [b.minX, b.minY, b.maxX, b.maxY];
}

export type ParsedMosaicRequest = z.output<typeof requestSchema>;

/** Validates a mosaic request; the ConfigError names each bad field and the value received. */
export function parseMosaicRequest(input: unknown): ParsedMosaicRequest {
  return parseOrThrow(requestSchema, input, 'mosaic request');
}
