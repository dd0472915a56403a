/**
 * Web Mercator (EPSG:3857) tile math for the usual 256-pixel XYZ grid, exact to floating point: tile bounds
 * in metres, resolution per zoom, lon/lat <-> metres <-> tile. Pure and Node-free: workflows plan with it.
 * Tile y counts from the top (XYZ, WMTS GoogleMapsCompatible); TMS counts from the bottom (`tmsY`).
 */

export const EARTH_RADIUS_M = 6_378_137;
/** Half the world's width in metres: the grid spans [-ORIGIN_SHIFT, ORIGIN_SHIFT] on both axes. */
export const ORIGIN_SHIFT_M = Math.PI * EARTH_RADIUS_M; // 20 037 508.342789244
/** The latitude where the square grid ends (atan(sinh(pi)) in degrees). */
export const MAX_LATITUDE = (Math.atan(Math.sinh(Math.PI)) * 180) / Math.PI; // 85.0511287798066
export const TILE_SIZE = 256;
export const MAX_ZOOM = 30;

export interface Bounds {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

/** Metres per pixel at zoom z for tiles of `tileSize` pixels. */
export function resolution(z: number, tileSize = TILE_SIZE): number {
  return (2 * ORIGIN_SHIFT_M) / (tileSize * 2 ** z);
}

/** Width (and height) of one tile in metres at zoom z. */
export function tileSpan(z: number): number {
  return (2 * ORIGIN_SHIFT_M) / 2 ** z;
}

/** EPSG:3857 bounds of XYZ tile (z, x, y). */
export function tileBounds(z: number, x: number, y: number): Bounds {
  checkTile(z, x, y);
  const span = tileSpan(z);
  return {
    minX: -ORIGIN_SHIFT_M + x * span,
    maxX: -ORIGIN_SHIFT_M + (x + 1) * span,
    maxY: ORIGIN_SHIFT_M - y * span,
    minY: ORIGIN_SHIFT_M - (y + 1) * span,
  };
}

export function lonLatToMeters(lon: number, lat: number): [number, number] {
  const clamped = Math.max(-MAX_LATITUDE, Math.min(MAX_LATITUDE, lat));
  const x = (lon * ORIGIN_SHIFT_M) / 180;
  const y = EARTH_RADIUS_M * Math.log(Math.tan(Math.PI / 4 + (clamped * Math.PI) / 360));
  return [x, y];
}

export function metersToLonLat(x: number, y: number): [number, number] {
  const lon = (x / ORIGIN_SHIFT_M) * 180;
  const lat = (Math.atan(Math.sinh(y / EARTH_RADIUS_M)) * 180) / Math.PI;
  return [lon, lat];
}

/** The XYZ tile containing EPSG:3857 point (x, y) at zoom z; points on the far edges fall in the last tile. */
export function metersToTile(x: number, y: number, z: number): [number, number] {
  const n = 2 ** z;
  const span = tileSpan(z);
  const tx = Math.floor((x + ORIGIN_SHIFT_M) / span);
  const ty = Math.floor((ORIGIN_SHIFT_M - y) / span);
  return [Math.min(n - 1, Math.max(0, tx)), Math.min(n - 1, Math.max(0, ty))];
}

export function lonLatToTile(lon: number, lat: number, z: number): [number, number] {
  const [x, y] = lonLatToMeters(lon, lat);
  return metersToTile(x, y, z);
}

/** TMS row of an XYZ row (and back: the mapping is its own inverse). */
export function tmsY(z: number, y: number): number {
  return 2 ** z - 1 - y;
}

export function checkTile(z: number, x: number, y: number): void {
  if (!Number.isInteger(z) || z < 0 || z > MAX_ZOOM)
    throw new RangeError(`tile: z must be an integer 0..${MAX_ZOOM} (got ${z})`);
  const n = 2 ** z;
  if (!Number.isInteger(x) || x < 0 || x >= n)
    throw new RangeError(`tile: x must be an integer 0..${n - 1} at zoom ${z} (got ${x})`);
  if (!Number.isInteger(y) || y < 0 || y >= n)
    throw new RangeError(`tile: y must be an integer 0..${n - 1} at zoom ${z} (got ${y})`);
}
