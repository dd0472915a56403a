import path from 'node:path';
import { ConfigError } from '../../breaker/config-error';
import { gridTileBounds, gridTileRange, type GridDef } from '../../geo/grid';
import { lonLatToMeters, MAX_LATITUDE, ORIGIN_SHIFT_M, tileSpan } from '../../geo/mercator';
import { bboxInGrid } from './bbox-crs';
import { checkCovers, countOutside, coverageInPlan } from './plan-coverage';
import type { TileAddress } from '../../sources/request-url';
import { parseSource, type SourceConfig } from '../../sources/schema';
import type { MosaicPlan, MosaicRequest, TileGrid } from '../../messages/mosaic-types';
import { durationMs } from '../../messages/duration';
import { MAX_DEADLINE_MS, parseMosaicRequest, type ParsedMosaicRequest } from '../../messages/mosaic-request';
import { MAX_BATCH_SIZE, MAX_PLAN_TILES } from '../../messages/plan-check';
import { planMetatile } from '../../messages/metatile-batches';
import { confineLocation } from '../confine/confine-location';
import type { WorkerRoots } from '../confine/roots';
import { loadSource } from '../sources-file';
import { judgeMirrors, type MirrorCandidate } from '../mirror/judge';
import { baseName, isObjectUrl, joinLocation } from '../storage/location';
import { capabilitiesFor } from '../../messages/locations';
import { storageFor } from '../storage/storage';
import { outputRefusal } from './stitch';

/** A direct chunk's side: large enough that a render's fixed cost is spread, small enough for any server. */
const CHUNK_PX = 2_048;

// The request's check lives with the messages, where clients reach it without the planner's I/O.
export { parseMosaicRequest, type ParsedMosaicRequest } from '../../messages/mosaic-request';

/**
 * The tiles covering a box at zoom z, in EPSG:3857 (or in the source's own grid `def`): a point on the east or
 * south edge belongs to no extra tile.
 */
export function gridFor(
  bounds: { minX: number; minY: number; maxX: number; maxY: number },
  z: number,
  tileSize: number,
  def?: GridDef,
): TileGrid {
  if (def) return { z, tileSize, ...gridTileRange(def, bounds, z, tileSize) };
  const n = 2 ** z;
  const span = tileSpan(z);
  const clamp = (v: number) => Math.min(n - 1, Math.max(0, v));
  return {
    z,
    tileSize,
    xMin: clamp(Math.floor((bounds.minX + ORIGIN_SHIFT_M) / span)),
    xMax: clamp(Math.ceil((bounds.maxX + ORIGIN_SHIFT_M) / span) - 1),
    yMin: clamp(Math.floor((ORIGIN_SHIFT_M - bounds.maxY) / span)),
    yMax: clamp(Math.ceil((ORIGIN_SHIFT_M - bounds.minY) / span) - 1),
  };
}

export const gridCols = (g: TileGrid) => g.xMax - g.xMin + 1;
export const gridRows = (g: TileGrid) => g.yMax - g.yMin + 1;

/** Tile i of the grid, row-major from the top-left. */
export function tileOf(g: TileGrid, i: number): TileAddress {
  const cols = gridCols(g);
  return { z: g.z, x: g.xMin + (i % cols), y: g.yMin + Math.floor(i / cols) };
}

/** The bounds of the whole grid: what the mosaic image covers, edge to edge; in EPSG:3857 unless the source has a grid of its own. */
export function gridBounds(g: TileGrid, def?: GridDef): MosaicPlan['bounds'] {
  if (def) {
    const nw = gridTileBounds(def, g.z, g.xMin, g.yMin, g.tileSize);
    const se = gridTileBounds(def, g.z, g.xMax, g.yMax, g.tileSize);
    return { minX: nw.minX, maxX: se.maxX, maxY: nw.maxY, minY: se.minY, crs: def.crs };
  }
  const span = tileSpan(g.z);
  return {
    minX: -ORIGIN_SHIFT_M + g.xMin * span,
    maxX: -ORIGIN_SHIFT_M + (g.xMax + 1) * span,
    maxY: ORIGIN_SHIFT_M - g.yMin * span,
    minY: ORIGIN_SHIFT_M - (g.yMax + 1) * span,
  };
}

/**
 * The source as a plan uses it: with directChunks, its metatile is the largest square of tiles a GetMap may
 * carry; the zoom must be in its range. Errors are the request's (`what`), naming the field and the value.
 */
export function sourceForPlan(
  source: SourceConfig,
  r: { zoom: number; directChunks?: boolean | undefined },
  what: string,
): SourceConfig {
  if (r.directChunks) {
    if (source.type !== 'wms')
      throw new ConfigError(what, [`directChunks: needs a WMS source (got a ${source.type} source)`]);
    // The largest square of tiles a GetMap may carry, with the source's buffer around it.
    const buffer = source.metatile?.buffer ?? 0;
    const k = Math.max(1, Math.floor((Math.min(source.maxRequestSize, CHUNK_PX) - 2 * buffer) / source.tileSize));
    source = { ...source, metatile: { size: [k, k], buffer } };
  }
  if (r.zoom < source.minZoom || r.zoom > source.maxZoom) {
    throw new ConfigError(what, [
      `zoom: must be within the source's range ${source.minZoom}..${source.maxZoom} (got ${r.zoom})`,
    ]);
  }
  if (
    (source.type === 'wmts-rest' || source.type === 'wmts-kvp') &&
    source.tileMatrices &&
    r.zoom >= source.tileMatrices.length
  ) {
    throw new ConfigError(what, [
      `zoom: the source's tileMatrices name levels 0..${source.tileMatrices.length - 1} (got ${r.zoom})`,
    ]);
  }
  if (source.grid && r.zoom >= source.grid.resolutions.length) {
    throw new ConfigError(what, [
      `zoom: the source's grid (${source.grid.crs}) has levels 0..${source.grid.resolutions.length - 1} (got ${r.zoom})`,
    ]);
  }
  return source;
}

/** Where a run's plan is kept, for re-drives. */
export const planFile = (workDir: string) => joinLocation(workDir, 'plan.json');

/** `<dir>/<name>` of the output without its extension: the manifest, mask and journals are named from it. */
export function outputBase(output: string): string {
  return output.replace(/\.tiff?$/i, '');
}

export interface PlanOptions {
  /** The planner's clock (epoch ms): a deadline is judged against it. */
  now?: number;
  /** Names the run's journal folder. */
  runTag?: string;
  /**
   * On a worker: the sources file is read only under `roots.sources` and quoted in no error, and the output,
   * work folder and tile store must lie under `roots.outputs`. Without roots (the user's own process) paths
   * are taken as given.
   */
  roots?: WorkerRoots;
}

/**
 * The planning activity: validates the request, resolves the source (from the sources file as it is now, so a
 * scheduled run picks up configuration changes), and computes the grid. Everything a bad request can get
 * wrong is refused here, before any fetch, with the field and the value named.
 */
export async function planMosaic(request: MosaicRequest, opts: PlanOptions = {}): Promise<MosaicPlan> {
  const { now = Date.now(), runTag = 'run', roots } = opts;
  const r = parseMosaicRequest(request);
  const resolved = await resolveSource(r, roots);
  const { sourceName, sourcesFile, mirrors } = resolved;
  const source = sourceForPlan(resolved.source, r, 'mosaic request');
  const grid = planGrid(r, source);
  const total = checkTileCount(r, grid);
  // A coverage that leaves no tile is refused here; the batches judge their own tiles the same way.
  const coverage = r.coverage ? coverageInPlan(r.coverage, r.crs, source.grid, 'mosaic request') : undefined;
  const outside = coverage ? await countOutside(grid, source.grid, coverage, 'mosaic request') : 0;
  checkCovers(outside, total, r.zoom, r.crs, 'mosaic request');
  // No image, no image's limits (a seed level may be wider than one stitched row allows).
  const refused =
    r.image === false ? null : outputRefusal(gridCols(grid), gridRows(grid), source.tileSize, r.extraFormats);
  if (refused)
    throw new ConfigError('mosaic request', [`extraFormats: ${refused} (got ${JSON.stringify(r.extraFormats)})`]);
  const { output, storeRoot, workDir } = await planLocations(r, roots);
  const deadlineAt = planDeadline(r.deadline, now);
  // An age counts back from the plan: every block and re-drive of this run keeps the same tiles.
  const age = r.refreshBefore !== undefined ? durationMs(r.refreshBefore) : null;
  const refreshBefore =
    r.refreshBefore === undefined ? undefined : age !== null ? now - age : Date.parse(r.refreshBefore);
  const batchSize = planBatchSize(source, r.batchSize);
  const judged = mirrors.length
    ? await judgeMirrors(
        { sourceName, source, grid, storeRoot },
        mirrors.map((m) => mirrorCandidate(m, r)),
        { now },
      )
    : [];
  return {
    sourceName,
    source,
    ...(sourcesFile !== undefined ? { sourcesFile } : {}),
    grid,
    total,
    bounds: gridBounds(grid, source.grid),
    output,
    extraFormats: r.extraFormats,
    // Only when off: plans that write them, as every plan before the choice did, stay as they were.
    ...(r.sidecars === false ? { sidecars: false } : {}),
    ...(r.image === false ? { image: false } : {}),
    workDir,
    journalDir: joinLocation(workDir, `journal-${runTag.replace(/[^\w.-]+/g, '_')}`),
    storeRoot,
    ...(refreshBefore !== undefined ? { refreshBefore } : {}),
    ...(coverage ? { coverage } : {}),
    fallback: r.fallback,
    afterDeadline: r.afterDeadline,
    deadlineAt,
    batchSize,
    blockTiles: Math.max(r.blockTiles, batchSize),
    parallelBatches: r.parallelBatches,
    breaker: r.breaker,
    ...(r.directChunks ? { directChunks: true } : {}),
    // Only when asked for: a plan without it is one every earlier worker's plan check accepts.
    ...(r.eventsPerRun !== undefined ? { eventsPerRun: r.eventsPerRun } : {}),
    // So that a worker of the release before object storage refuses the plan instead of writing locally.
    ...(capabilitiesFor([output, storeRoot]).length ? { requires: capabilitiesFor([output, storeRoot]) } : {}),
    ...(judged.length ? { mirrors: judged } : {}),
  };
}

/** The request's source as configured: its name, the sources file it came from (if any) and its mirrors. */
interface RequestedSource {
  sourceName: string;
  source: SourceConfig;
  sourcesFile: string | undefined;
  mirrors: { name: string; source: SourceConfig }[];
}

/** The request's source, read from its sources file or taken inline (never with credentials on a worker). */
async function resolveSource(r: ParsedMosaicRequest, roots: WorkerRoots | undefined): Promise<RequestedSource> {
  if (r.sourcesFile !== undefined) {
    try {
      // On a worker, a relative path is taken from the first sources root.
      const file = roots ? r.sourcesFile : path.resolve(r.sourcesFile);
      const loaded = await loadSource(file, r.sourceName, {
        subject: 'mosaic request',
        ...(roots ? { roots: roots.sources } : {}),
      });
      return { sourceName: loaded.name, source: loaded.source, sourcesFile: loaded.file, mirrors: loaded.mirrors };
    } catch (err) {
      // An unreadable or invalid sources file will not fix itself on a retry.
      throw err instanceof ConfigError
        ? err
        : new ConfigError('mosaic request', [`sourcesFile: ${JSON.stringify(r.sourcesFile)} cannot be read`]);
    }
  }
  const source = parseSource(r.source, 'mosaic request: source');
  const sourceName = r.sourceName ?? 'inline';
  if (roots && source.auth) {
    // The requester would choose both the URL and the variable: any of the worker's secrets, to any host.
    throw new ConfigError('mosaic request', [
      "source.auth: credentials are used only with sources read from a sources file under the worker's sources roots, where the operator pairs each with its URL; move this source into such a file",
    ]);
  }
  return { sourceName, source, sourcesFile: undefined, mirrors: [] };
}

/** The tiles covering the request's bbox, on the source's own grid or on Web Mercator's. */
function planGrid(r: ParsedMosaicRequest, source: SourceConfig): TileGrid {
  if (source.grid) {
    const b = bboxInGrid(r.bbox, r.crs, source.grid, 'mosaic request');
    const [gx0, gy0, gx1, gy1] = source.grid.extent;
    // Clamped to the grid, a box beyond it would quietly become the edge's tiles.
    if (!(b.minX < gx1 && b.maxX > gx0 && b.minY < gy1 && b.maxY > gy0)) {
      throw new ConfigError('mosaic request', [
        `bbox: ${JSON.stringify(r.bbox)} (${r.crs}) lies outside the source grid's extent ${JSON.stringify(source.grid.extent)} (${source.grid.crs})${r.crs === source.grid.crs ? '' : `; in ${source.grid.crs} it is ${JSON.stringify([b.minX, b.minY, b.maxX, b.maxY].map((v) => Math.round(v)))}`}`,
      ]);
    }
    return gridFor(b, r.zoom, source.tileSize, source.grid);
  }
  if (r.crs !== 'EPSG:4326' && r.crs !== 'EPSG:3857') {
    throw new ConfigError('mosaic request', [
      `crs: the source is on the Web Mercator grid; give the bbox in EPSG:4326 or EPSG:3857, or the source a grid in ${r.crs} (got ${JSON.stringify(r.crs)})`,
    ]);
  }
  const [w, s, e, n] = r.bbox;
  // Web Mercator ends short of the poles; a grid of its own (EPSG:4326) may not.
  if (r.crs === 'EPSG:4326' && (s >= MAX_LATITUDE || n <= -MAX_LATITUDE)) {
    throw new ConfigError('mosaic request', [
      `${r.bboxFromCoverage ? 'coverage' : 'bbox'}: lies beyond web mercator's latitude limit ±${MAX_LATITUDE.toFixed(4)} (got ${JSON.stringify(r.bbox)})`,
    ]);
  }
  const [minX, minY] = r.crs === 'EPSG:4326' ? lonLatToMeters(w, s) : [w, s];
  const [maxX, maxY] = r.crs === 'EPSG:4326' ? lonLatToMeters(e, n) : [e, n];
  return gridFor({ minX, minY, maxX, maxY }, r.zoom, source.tileSize);
}

/** The grid's tile count, refused (with what to do instead) when it is more than the request's maxTiles. */
function checkTileCount(r: Pick<ParsedMosaicRequest, 'maxTiles' | 'zoom'>, grid: TileGrid): number {
  const total = gridCols(grid) * gridRows(grid);
  if (total > r.maxTiles) {
    const size = `the plan has ${total} tiles (${gridCols(grid)} columns x ${gridRows(grid)} rows at zoom ${r.zoom}), more than maxTiles ${r.maxTiles}`;
    // maxTiles stops at MAX_PLAN_TILES (the request schema's cap): past it, "raise maxTiles" would be refused too.
    const split = `split the bbox into at least ${Math.ceil(total / MAX_PLAN_TILES)} parts, one mosaic each (or, for a tile cache, one seed each), or take a lower zoom`;
    const advice =
      r.maxTiles >= MAX_PLAN_TILES
        ? `maxTiles is at its cap, ${MAX_PLAN_TILES} tiles, and cannot be raised further: ${split}`
        : total > MAX_PLAN_TILES
          ? `maxTiles can be raised to ${MAX_PLAN_TILES} at most, fewer than the plan's tiles: ${split}`
          : `raise maxTiles to ${total} or more (at most ${MAX_PLAN_TILES}) or shrink the bbox`;
    throw new ConfigError('mosaic request', [`maxTiles: ${size}; ${advice}`]);
  }
  return total;
}

/** The output, tile store and work folder, confined to the worker's roots (or resolved, without roots). */
async function planLocations(
  r: Pick<ParsedMosaicRequest, 'output' | 'storeRoot'>,
  roots: WorkerRoots | undefined,
): Promise<{ output: string; storeRoot: string; workDir: string }> {
  const confine = (p: string, field: string) =>
    roots ? confineLocation(p, roots, field, 'mosaic request') : Promise.resolve(isObjectUrl(p) ? p : path.resolve(p));
  const output = await confine(r.output, 'output');
  const storeRoot = await confine(r.storeRoot ?? `${outputBase(output)}.tiles`, 'storeRoot');
  // Beside the output, but checked on its own: a symlink there must not lead outside the roots.
  const workDir = await confine(`${outputBase(output)}.work`, 'output');
  return { output, storeRoot, workDir };
}

/** The request's deadline as an instant (epoch ms), refused when past or more than 7 days ahead; null without one. */
function planDeadline(deadline: string | undefined, now: number): number | null {
  if (deadline === undefined) return null;
  const d = durationMs(deadline);
  const deadlineAt = d !== null ? now + d : Date.parse(deadline);
  if (deadlineAt <= now) {
    // A fixed instant in a schedule's request is in the past from the second night on: say so, do not wait for nothing.
    throw new ConfigError('mosaic request', [
      `deadline: ${deadline} is already past (now ${new Date(now).toISOString()}); use a duration such as 2h for a recurring run`,
    ]);
  }
  if (deadlineAt - now > MAX_DEADLINE_MS) {
    throw new ConfigError('mosaic request', [`deadline: at most 7 days ahead (got ${JSON.stringify(deadline)})`]);
  }
  return deadlineAt;
}

/** The batch size: for a metatiled WMS source, rounded up to whole metatiles when that stays within the cap. */
function planBatchSize(source: SourceConfig, requested: number): number {
  // A metatiled WMS source: batches of whole metatiles (the workflows pack them so), one GetMap each.
  const meta = planMetatile({ source });
  const cells = meta ? meta[0] * meta[1] : 1;
  const rounded = Math.ceil(requested / cells) * cells;
  return cells > 1 && rounded <= MAX_BATCH_SIZE ? rounded : requested;
}

/** A mirror as the plan would use it (its zoom range, a direct-chunk plan's metatile), or why it cannot be. */
function mirrorCandidate(
  m: { name: string; source: SourceConfig },
  r: { zoom: number; directChunks?: boolean | undefined },
): MirrorCandidate {
  try {
    return { name: m.name, source: sourceForPlan(m.source, r, `mirror ${JSON.stringify(m.name)}`) };
  } catch (err) {
    return {
      name: m.name,
      source: m.source,
      refused: err instanceof ConfigError ? err.message : 'it cannot serve this plan',
    };
  }
}

/**
 * The planning activity: plans, and clears the journals of earlier runs on the same output (last night's
 * records must not mix with tonight's). Idempotent: a retry plans the same and clears nothing new.
 */
export async function planMosaicRun(request: MosaicRequest, runTag: string, roots?: WorkerRoots): Promise<MosaicPlan> {
  const plan = await planMosaic(request, { runTag, ...(roots ? { roots } : {}) });
  const storage = storageFor(plan.workDir);
  const mine = baseName(plan.journalDir);
  const entries = await storage.list(plan.workDir);
  await Promise.all(
    entries
      .filter((e) => e.startsWith('journal-') && e !== mine)
      .map((e) => storage.removeTree(joinLocation(plan.workDir, e))),
  );
  // The plan goes beside the journals at once, so even a run that dies before assembling can be re-driven.
  await storage.write(planFile(plan.workDir), Buffer.from(JSON.stringify(plan)), { contentType: 'application/json' });
  return plan;
}
