/**
 * A request's coverage in the plan's coordinates (EPSG:3857 metres, or the source grid's CRS), and which of
 * the plan's tiles it covers: the planner counts those outside, each fetch batch leaves them out.
 */
import { ConfigError } from '../../breaker/config-error';
import { COVERED_SHARE, mapCoverage, rowAreas, type Coverage } from '../../geo/coverage';
import { gridTileBounds, type GridDef } from '../../geo/grid';
import { lonLatToMeters, tileBounds } from '../../geo/mercator';
import type { MosaicPlan, TileGrid } from '../../messages/mosaic-types';
import type { TileAddress } from '../../sources/request-url';
import { toGridCrs } from './bbox-crs';

/** The coverage's vertices in the plan's CRS (its edges stay straight there, as a seeder's coverage does). */
export function coverageInPlan(c: Coverage, crs: string, def: GridDef | undefined, what: string): Coverage {
  if (def) {
    const forward = toGridCrs(crs, def, what, 'coverage');
    return forward ? mapCoverage(c, forward) : c;
  }
  return crs === 'EPSG:4326' ? mapCoverage(c, ([lon, lat]) => lonLatToMeters(lon, lat)) : c;
}

const tileBox = (g: TileGrid, def: GridDef | undefined, t: { x: number; y: number }) => (def ? gridTileBounds(def, g.z, t.x, t.y, g.tileSize) : tileBounds(g.z, t.x, t.y));

/** Rows times positions the planner may spend on a coverage: a few seconds of arithmetic at most. */
export const MAX_COVERAGE_WORK = 40_000_000;

/** Which of the tiles (of one plan, usually a batch's run of them) the coverage covers, a row at a time. */
export function coveredTiles(plan: Pick<MosaicPlan, 'grid' | 'coverage'>, def: GridDef | undefined, tiles: TileAddress[]): boolean[] {
  if (!plan.coverage) return tiles.map(() => true);
  const rows = new Map<number, { xMin: number; xMax: number }>();
  for (const t of tiles) {
    const r = rows.get(t.y);
    rows.set(t.y, r ? { xMin: Math.min(r.xMin, t.x), xMax: Math.max(r.xMax, t.x) } : { xMin: t.x, xMax: t.x });
  }
  const covered = new Map<number, { xMin: number; inside: boolean[] }>();
  for (const [y, { xMin, xMax }] of rows) covered.set(y, { xMin, inside: coveredInRow(plan.coverage, plan.grid, def, y, xMin, xMax) });
  return tiles.map((t) => {
    const row = covered.get(t.y)!;
    return row.inside[t.x - row.xMin]!;
  });
}

/** Tiles xMin..xMax of row y: covered or not. */
function coveredInRow(coverage: Coverage, g: TileGrid, def: GridDef | undefined, y: number, xMin: number, xMax: number): boolean[] {
  const first = tileBox(g, def, { x: xMin, y });
  const w = first.maxX - first.minX;
  const areas = rowAreas(coverage, first.minX, w, xMax - xMin + 1, first.minY, first.maxY);
  const least = w * (first.maxY - first.minY) * COVERED_SHARE;
  return Array.from(areas, (a) => a > least);
}

/**
 * The plan's tiles outside the coverage, a row at a time, letting the worker's other work (heartbeats) run
 * between rows. A coverage whose positions times the plan's rows pass MAX_COVERAGE_WORK is refused first.
 */
export async function countOutside(grid: TileGrid, def: GridDef | undefined, coverage: Coverage, what: string): Promise<number> {
  const positions = coverage.reduce((n, p) => n + p.reduce((m, r) => m + r.length, 0), 0);
  const rows = grid.yMax - grid.yMin + 1;
  if (positions * rows > MAX_COVERAGE_WORK) {
    throw new ConfigError(what, [
      `coverage: ${positions} positions over ${rows} rows of tiles is more than this planner judges (${MAX_COVERAGE_WORK} position-rows); simplify the coverage or seed fewer levels at once`,
    ]);
  }
  let outside = 0;
  let since = Date.now();
  for (let y = grid.yMin; y <= grid.yMax; y++) {
    outside += coveredInRow(coverage, grid, def, y, grid.xMin, grid.xMax).filter((c) => !c).length;
    if (Date.now() - since > 50) {
      await new Promise((resolve) => setImmediate(resolve));
      since = Date.now();
    }
  }
  return outside;
}

/** A coverage no tile of the plan overlaps is a mistake (another CRS, swapped axes): said before any fetch. */
export function checkCovers(outside: number, total: number, zoom: number, crs: string, what: string): void {
  if (outside < total) return;
  throw new ConfigError(what, [`coverage: overlaps none of the ${total} tiles of the bbox at zoom ${zoom} (coordinates in ${crs}, x then y)`]);
}
