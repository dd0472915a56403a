/**
 * The one tile set every seeder of bench:seeders seeds: a square block of XYZ tiles (rows from the top) at one
 * zoom, aligned to its own side (32 by default) so that metatiles of any size dividing the side fall on the
 * same boundaries in every tool (mapproxy and mapcache align metatiles to multiples of the meta size from the
 * grid origin; 2^z rows are a multiple of it, so top- and bottom-origin alignment agree).
 */
import { lonLatToTile, resolution, tileBounds } from '../../src/geo/mercator';

export interface TileSet {
  z: number;
  /** Inclusive, XYZ (rows from the top). */
  xMin: number;
  xMax: number;
  yMin: number;
  yMax: number;
}

/** An arbitrary fixed place for the synthetic fixture (the raster is made up; only the grid matters). */
const ANCHOR_LON = 6.63;
const ANCHOR_LAT = 46.52;

export function chooseTileSet(z: number, side: number): TileSet {
  if (!Number.isInteger(z) || z < 6 || z > 20) throw new Error(`--zoom must be an integer 6..20 (got ${z})`);
  if (!Number.isInteger(side) || side < 1 || side > 64)
    throw new Error(`--side must be an integer 1..64 (got ${side})`);
  const [tx, ty] = lonLatToTile(ANCHOR_LON, ANCHOR_LAT, z);
  const xMin = Math.floor(tx / side) * side;
  const yMin = Math.floor(ty / side) * side;
  return { z, xMin, xMax: xMin + side - 1, yMin, yMax: yMin + side - 1 };
}

export const tileCount = (t: TileSet) => (t.xMax - t.xMin + 1) * (t.yMax - t.yMin + 1);

export function* tilesOf(t: TileSet): Generator<[number, number]> {
  for (let y = t.yMin; y <= t.yMax; y++) for (let x = t.xMin; x <= t.xMax; x++) yield [x, y];
}

/** The tile set's exact EPSG:3857 bounds: [minX, minY, maxX, maxY]. */
export function exactBounds(t: TileSet): [number, number, number, number] {
  const nw = tileBounds(t.z, t.xMin, t.yMin);
  const se = tileBounds(t.z, t.xMax, t.yMax);
  return [nw.minX, se.minY, se.maxX, nw.maxY];
}

/**
 * The extent handed to mapproxy-seed (coverage bbox) and mapcache_seed (-e): the exact bounds shrunk by a
 * quarter pixel on every side. Both tools select the tiles that intersect the extent; with the exact bounds a
 * float rounding in their grid arithmetic could let a neighbouring row or column touch it. A quarter pixel
 * inside, the set of intersecting tiles is exactly the tile set (the bench counts the tiles on disk to check).
 */
export function seedExtent(t: TileSet): [number, number, number, number] {
  const [minX, minY, maxX, maxY] = exactBounds(t);
  const e = resolution(t.z) / 4;
  return [minX + e, minY + e, maxX - e, maxY - e];
}

export const tileKey = (x: number, y: number) => `${x}/${y}`;
