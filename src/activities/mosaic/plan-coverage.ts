/**
 * A request's coverage in the plan's coordinates (EPSG:3857 metres, or the source grid's CRS), and which of
 * the plan's tiles it covers: the planner counts those outside, each fetch batch leaves them out.
 */
import { ConfigError } from '../../breaker/config-error';
import { coverageWithin, mapCoverage, type Coverage } from '../../geo/coverage';
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

/** Which of the tiles (of one plan, usually a batch's run of them) the coverage covers. */
export function coveredTiles(plan: Pick<MosaicPlan, 'grid' | 'coverage'>, def: GridDef | undefined, tiles: TileAddress[]): boolean[] {
  if (!plan.coverage || tiles.length === 0) return tiles.map(() => true);
  const boxes = tiles.map((t) => tileBox(plan.grid, def, t));
  const area = { minX: Math.min(...boxes.map((b) => b.minX)), minY: Math.min(...boxes.map((b) => b.minY)), maxX: Math.max(...boxes.map((b) => b.maxX)), maxY: Math.max(...boxes.map((b) => b.maxY)) };
  const covers = coverageWithin(plan.coverage, area);
  return boxes.map(covers);
}

/** The plan's tiles outside the coverage, a row at a time (each row clips the coverage once). */
export function countOutside(grid: TileGrid, def: GridDef | undefined, coverage: Coverage): number {
  let outside = 0;
  for (let y = grid.yMin; y <= grid.yMax; y++) {
    const row = Array.from({ length: grid.xMax - grid.xMin + 1 }, (_, k) => ({ z: grid.z, x: grid.xMin + k, y }));
    outside += coveredTiles({ grid, coverage }, def, row).filter((c) => !c).length;
  }
  return outside;
}

/** A coverage no tile of the plan overlaps is a mistake (another CRS, swapped axes): said before any fetch. */
export function checkCovers(outside: number, total: number, zoom: number, crs: string, what: string): void {
  if (outside < total) return;
  throw new ConfigError(what, [`coverage: overlaps none of the ${total} tiles of the bbox at zoom ${zoom} (coordinates in ${crs}, x then y)`]);
}
