/**
 * A request's coverage in the plan's coordinates (EPSG:3857 metres, or the source grid's CRS), and which of
 * the plan's tiles it covers: the planner counts those outside, each fetch batch leaves them out.
 */
import { ConfigError } from '../../breaker/config-error';
import {
  COVERED_SHARE,
  mapCoverage,
  prepareCoverage,
  rowAreas,
  type Coverage,
  type PreparedRing,
} from '../../geo/coverage';
import { gridOrigin, gridTileSpan, type GridDef } from '../../geo/grid';
import { lonLatToMeters, ORIGIN_SHIFT_M, tileSpan } from '../../geo/mercator';
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

/** Rows times positions the planner may spend on a coverage: a few seconds of arithmetic at most. */
export const MAX_COVERAGE_WORK = 40_000_000;

/**
 * The coverage in the plan level's tile units: x in columns from the level's origin, y in rows down from it, so
 * a tile is the unit square at its address. Every caller (the planner's whole rows, a batch's run of them, the
 * assembly) then judges a tile from the same numbers, not from bounds that drift with the column.
 */
function inTileUnits(coverage: Coverage, g: TileGrid, def: GridDef | undefined): PreparedRing[] {
  const [ox, oy] = def ? gridOrigin(def, g.z) : [-ORIGIN_SHIFT_M, ORIGIN_SHIFT_M];
  const span = def ? gridTileSpan(def, g.z, g.tileSize) : tileSpan(g.z);
  return prepareCoverage(mapCoverage(coverage, ([x, y]) => [(x - ox) / span, (oy - y) / span]));
}

/** Tiles xMin..xMax of row y: covered or not. */
function coveredInRow(rings: PreparedRing[], y: number, xMin: number, xMax: number): boolean[] {
  return Array.from(rowAreas(rings, xMin, 1, xMax - xMin + 1, y, y + 1), (a) => a > COVERED_SHARE);
}

/** Lets the worker's other work (heartbeats, other activities) run between rows of a long computation. */
function pacer(): () => Promise<void> {
  let since = Date.now();
  return async () => {
    if (Date.now() - since < 50) return;
    await new Promise((resolve) => setImmediate(resolve));
    since = Date.now();
  };
}

/** Which of the tiles (of one plan: a batch's run of them, the assembly's unreached ones) the coverage covers, a row at a time. */
export async function coveredTiles(
  plan: Pick<MosaicPlan, 'grid' | 'coverage'>,
  def: GridDef | undefined,
  tiles: TileAddress[],
): Promise<boolean[]> {
  if (!plan.coverage) return tiles.map(() => true);
  const rings = inTileUnits(plan.coverage, plan.grid, def);
  const rows = new Map<number, { xMin: number; xMax: number }>();
  for (const t of tiles) {
    const r = rows.get(t.y);
    rows.set(t.y, r ? { xMin: Math.min(r.xMin, t.x), xMax: Math.max(r.xMax, t.x) } : { xMin: t.x, xMax: t.x });
  }
  const pace = pacer();
  const covered = new Map<number, { xMin: number; inside: boolean[] }>();
  for (const [y, { xMin, xMax }] of rows) {
    covered.set(y, { xMin, inside: coveredInRow(rings, y, xMin, xMax) });
    await pace();
  }
  return tiles.map((t) => {
    const row = covered.get(t.y)!;
    return row.inside[t.x - row.xMin]!;
  });
}

/**
 * The plan's tiles outside the coverage, a row at a time. A coverage whose positions times the plan's rows
 * pass MAX_COVERAGE_WORK is refused first.
 */
export async function countOutside(
  grid: TileGrid,
  def: GridDef | undefined,
  coverage: Coverage,
  what: string,
): Promise<number> {
  const positions = coverage.reduce((n, p) => n + p.reduce((m, r) => m + r.length, 0), 0);
  const rows = grid.yMax - grid.yMin + 1;
  if (positions * rows > MAX_COVERAGE_WORK) {
    throw new ConfigError(what, [
      `coverage: ${positions} positions over ${rows} rows of tiles is more than this planner judges (${MAX_COVERAGE_WORK} position-rows); simplify the coverage or seed fewer levels at once`,
    ]);
  }
  const rings = inTileUnits(coverage, grid, def);
  const pace = pacer();
  let outside = 0;
  for (let y = grid.yMin; y <= grid.yMax; y++) {
    outside += coveredInRow(rings, y, grid.xMin, grid.xMax).filter((c) => !c).length;
    await pace();
  }
  return outside;
}

/** A coverage no tile of the plan overlaps is a mistake (another CRS, swapped axes): said before any fetch. */
export function checkCovers(outside: number, total: number, zoom: number, crs: string, what: string): void {
  if (outside < total) return;
  throw new ConfigError(what, [
    `coverage: overlaps none of the ${total} tiles of the bbox at zoom ${zoom} (coordinates in ${crs}, x then y)`,
  ]);
}
