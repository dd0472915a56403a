/**
 * A plan handed to a block workflow, a batch or an assembly by whoever started the workflow, checked as the
 * planner would have made it. Pure and Node-free, so the block workflow checks it too, before it loops over
 * it (a batchSize of 0 would spin its workflow task; a grid of strings would make folder names).
 */
import { z } from 'zod';
import { MAX_COVERAGE_POSITIONS } from './coverage';
import { parseOrThrow } from '../breaker/config-error';
import { MAX_ZOOM } from '../geo/mercator';
import { gridLevelSize } from '../geo/grid';
import { MAX_MIRRORS, sourceNameSchema, sourceSchema } from '../sources/schema';
import { CAPABILITIES } from './locations';
import type { MosaicPlan, TileSelection } from './mosaic-types';

/** The most tiles a plan may hold (2^22, a 2048 x 2048 grid): the assembly keeps a record of each in memory. */
export const MAX_PLAN_TILES = 4_194_304;
/** Limits the planner applies: batches are heartbeat payloads, blocks bound a child's history. */
export const MAX_BATCH_SIZE = 1_024;
export const MAX_BATCHES_PER_BLOCK = 2_048;
/** Bounds of a run's history before it continues as new: below the lower one a run would hand over every few
 * passes; above the upper one what follows the check (batches in flight, a wait) could reach 10,240. */
export const MIN_EVENTS_PER_RUN = 200;
export const MAX_EVENTS_PER_RUN = 8_000;

const int = z.number().int();
const fallback = z.enum(['fail-fast', 'stale', 'hole', 'wait']);
const path = z.string().min(1).max(4_096);

const planSchema = z
  .object({
    sourceName: sourceNameSchema,
    source: z.unknown(),
    sourcesFile: path.optional(),
    grid: z
      .object({
        z: int.min(0).max(MAX_ZOOM),
        tileSize: int.min(16).max(4_096),
        xMin: int.min(0),
        xMax: int.min(0),
        yMin: int.min(0),
        yMax: int.min(0),
      })
      .strict(),
    total: int.min(1).max(MAX_PLAN_TILES),
    bounds: z
      .object({
        minX: z.number(),
        minY: z.number(),
        maxX: z.number(),
        maxY: z.number(),
        crs: z
          .string()
          .regex(/^EPSG:\d{4,6}$/)
          .optional(),
      })
      .strict(),
    output: path.regex(/\.tiff?$/i),
    extraFormats: z.array(z.enum(['png', 'webp'])),
    sidecars: z.boolean().optional(),
    image: z.boolean().optional(),
    workDir: path,
    // Plans made before per-run journals have none.
    journalDir: path.optional(),
    storeRoot: path,
    refreshBefore: z.number().refine(Number.isFinite).optional(),
    coverage: z
      .array(
        z
          .array(z.array(z.tuple([z.number().refine(Number.isFinite), z.number().refine(Number.isFinite)])).min(4))
          .min(1),
      )
      .min(1)
      .refine(
        (c) => c.flat(2).length <= MAX_COVERAGE_POSITIONS,
        `must have at most ${MAX_COVERAGE_POSITIONS} positions`,
      )
      .optional(),
    fallback,
    afterDeadline: fallback.exclude(['wait']),
    deadlineAt: z.number().nullable(),
    batchSize: int.min(1).max(MAX_BATCH_SIZE),
    blockTiles: int.min(1).max(MAX_BATCH_SIZE * MAX_BATCHES_PER_BLOCK),
    parallelBatches: int.min(1).max(64),
    breaker: z.boolean(),
    directChunks: z.boolean().optional(),
    fetchQueue: z
      .object({ taskQueue: z.string().min(1).max(1_000), startWithinMs: int.min(1_000).max(24 * 3_600_000) })
      .strict()
      .optional(),
    requires: z.array(z.enum(CAPABILITIES)).max(16).optional(),
    eventsPerRun: int.min(MIN_EVENTS_PER_RUN).max(MAX_EVENTS_PER_RUN).optional(),
    mirrors: z
      .array(
        z
          .object({
            name: sourceNameSchema,
            source: z.unknown(),
            usable: z.boolean(),
            reason: z.string().max(2_000),
            agreement: z
              .object({
                tiles: int.min(0).max(64),
                meanAbsDiff: z.number(),
                maxMeanAbsDiff: z.number(),
                differingShare: z.number(),
                maxDifferingShare: z.number(),
                measuredAt: z.string().max(64),
              })
              .strict()
              .optional(),
          })
          .strict(),
      )
      .max(MAX_MIRRORS)
      .optional(),
  })
  .strict()
  .superRefine((p, ctx) => {
    const g = p.grid;
    // The source's own grid has its own size per level; Web Mercator's has 2^z tiles a side.
    const s = p.source;
    const own =
      p.directChunks && s !== null && typeof s === 'object'
        ? { ...(s as Record<string, unknown>), metatile: undefined }
        : s;
    const parsed = sourceSchema.safeParse(own);
    const def = parsed.success ? parsed.data.grid : undefined;
    const size =
      def && g.z < def.resolutions.length
        ? gridLevelSize(def, g.z, g.tileSize)
        : def
          ? { cols: 0, rows: 0 }
          : { cols: 2 ** g.z, rows: 2 ** g.z };
    if (g.xMin > g.xMax || g.yMin > g.yMax || g.xMax >= size.cols || g.yMax >= size.rows) {
      ctx.addIssue({ code: 'custom', path: ['grid'], message: `must be a box of tiles within zoom ${g.z}` });
    } else if (p.total !== (g.xMax - g.xMin + 1) * (g.yMax - g.yMin + 1)) {
      ctx.addIssue({ code: 'custom', path: ['total'], message: 'must be the number of tiles of the grid' });
    }
    // The source as a sources file may write it; a direct-chunk metatile is the planner's own, checked by size.
    if (!parsed.success) {
      ctx.addIssue({
        code: 'custom',
        path: ['source'],
        message: `is not a valid source (${parsed.error.issues.map((i) => i.path.join('.') || '(root)').join(', ')})`,
      });
    } else if (parsed.data.tileSize !== g.tileSize) {
      ctx.addIssue({ code: 'custom', path: ['grid', 'tileSize'], message: "must be the source's tileSize" });
    }
    // The image's CRS is the source grid's: the georeferencing must not name another.
    if (parsed.success && p.bounds.crs !== def?.crs)
      ctx.addIssue({
        code: 'custom',
        path: ['bounds', 'crs'],
        message: "must be the source grid's CRS (none for Web Mercator)",
      });
    p.mirrors?.forEach((m, i) => {
      const mirror = sourceSchema.safeParse(
        p.directChunks && m.source !== null && typeof m.source === 'object'
          ? { ...(m.source as Record<string, unknown>), metatile: undefined }
          : m.source,
      );
      if (!mirror.success)
        ctx.addIssue({
          code: 'custom',
          path: ['mirrors', i, 'source'],
          message: `is not a valid source (${mirror.error.issues.map((x) => x.path.join('.') || '(root)').join(', ')})`,
        });
      else if (mirror.data.tileSize !== g.tileSize)
        ctx.addIssue({
          code: 'custom',
          path: ['mirrors', i, 'source', 'tileSize'],
          message: "must be the source's tileSize",
        });
    });
  });

/** `plan` as a planner makes it, or a ConfigError naming what is not. */
export function checkPlan(plan: unknown, subject: string): MosaicPlan {
  parseOrThrow(planSchema, plan, subject);
  return plan as MosaicPlan;
}

/** A selection of the plan's own tiles, at most `max` of them. */
export function checkSelection(sel: unknown, plan: MosaicPlan, max: number, subject: string): TileSelection {
  const index = int.min(0).max(plan.total - 1);
  const schema = z.union([
    z
      .object({ start: index, count: int.min(1).max(max) })
      .strict()
      .refine((s) => s.start + s.count <= plan.total, 'must lie within the plan'),
    z.object({ indices: z.array(index).max(max) }).strict(),
  ]);
  return parseOrThrow(schema, sel, subject);
}
