/**
 * Tile grids other than Web Mercator's: a projected CRS (by EPSG code) or WGS 84 in degrees, a top-left origin
 * shared by every level (or one per level, as WMTS matrices may each have their own corner), one resolution per level (CRS units per pixel, level 0 first) and the extent where tiles exist, as
 * MapProxy's grids and most WMTS TileMatrixSets are (a matrix's scale denominator x 0.00028 m is its
 * resolution in metres; its top-left corner is the origin). Tile y counts from the top, as in WMTS. Pure and
 * Node-free: workflows plan with it.
 */
import type { Bounds } from './mercator';

export interface GridDef {
  /** `EPSG:<code>` of a projected CRS in metres, easting then northing (or EPSG:4326, longitude then latitude). */
  crs: string;
  /** The top-left corner of tile 0/0 at every level: [easting, northing], whatever the CRS's axis order. */
  origin: [number, number];
  /** The top-left corner of each level, level 0 first, where the levels' corners differ (then `origin` is level 0's). */
  origins?: [number, number][] | undefined;
  /** CRS units per pixel, level 0 first, each smaller than the one before. */
  resolutions: number[];
  /** [minX, minY, maxX, maxY]: where the grid has tiles (right of and below the origin). */
  extent: [number, number, number, number];
  /** A PROJ definition, for a CRS tilebreaker does not know, to take a bbox in degrees. */
  proj4?: string | undefined;
  /** The CRS's axis order, for one tilebreaker does not know (`ne`: northing first, as in WMS 1.3.0's BBOX). */
  axisOrder?: 'en' | 'ne' | undefined;
}

/** The width (and height) of one tile of `tileSize` pixels at level z, in CRS units. */
export function gridTileSpan(g: GridDef, z: number, tileSize: number): number {
  const r = g.resolutions[z];
  if (r === undefined)
    throw new RangeError(
      `grid: level ${z} is not one of the grid's ${g.resolutions.length} levels (0..${g.resolutions.length - 1})`,
    );
  return r * tileSize;
}

/** The top-left corner of tile 0/0 at level z. */
export function gridOrigin(g: GridDef, z: number): [number, number] {
  return g.origins?.[z] ?? g.origin;
}

/** Columns and rows of tiles at level z: those that cover the extent. */
export function gridLevelSize(g: GridDef, z: number, tileSize: number): { cols: number; rows: number } {
  const span = gridTileSpan(g, z, tileSize);
  const [ox, oy] = gridOrigin(g, z);
  const [, minY, maxX] = g.extent;
  // A hair of tolerance: an extent that ends on a tile edge must not gain a column of float noise.
  return {
    cols: Math.max(1, Math.ceil((maxX - ox) / span - 1e-9)),
    rows: Math.max(1, Math.ceil((oy - minY) / span - 1e-9)),
  };
}

/** The bounds of tile (z, x, y) in the grid's CRS. */
export function gridTileBounds(g: GridDef, z: number, x: number, y: number, tileSize: number): Bounds {
  const span = gridTileSpan(g, z, tileSize);
  const [ox, oy] = gridOrigin(g, z);
  return { minX: ox + x * span, maxX: ox + (x + 1) * span, maxY: oy - y * span, minY: oy - (y + 1) * span };
}

/** The tiles at level z that `b` (in the grid's CRS) touches, clamped to the level's tiles. */
export function gridTileRange(
  g: GridDef,
  b: Bounds,
  z: number,
  tileSize: number,
): { xMin: number; xMax: number; yMin: number; yMax: number } {
  const span = gridTileSpan(g, z, tileSize);
  const { cols, rows } = gridLevelSize(g, z, tileSize);
  const cx = (v: number) => Math.max(0, Math.min(cols - 1, v));
  const cy = (v: number) => Math.max(0, Math.min(rows - 1, v));
  // In tiles from the origin; an edge within float noise of a tile edge is on it (a manifest's own bounds
  // give back its own tiles, not one more row or column).
  const at = (d: number) => {
    const q = d / span;
    return Math.abs(q - Math.round(q)) < 1e-9 * Math.max(1, Math.abs(q)) ? Math.round(q) : q;
  };
  const [ox, oy] = gridOrigin(g, z);
  return {
    xMin: cx(Math.floor(at(b.minX - ox))),
    xMax: cx(Math.ceil(at(b.maxX - ox)) - 1),
    yMin: cy(Math.floor(at(oy - b.maxY))),
    yMax: cy(Math.ceil(at(oy - b.minY)) - 1),
  };
}

/** Why `g` is not a usable grid (each problem names its field), or an empty list. */
export function gridProblems(g: GridDef): { path: (string | number)[]; message: string }[] {
  const out: { path: (string | number)[]; message: string }[] = [];
  g.resolutions.forEach((r, i) => {
    if (i > 0 && !(r < g.resolutions[i - 1]!))
      out.push({
        path: ['resolutions', i],
        message: `must be smaller than the level before (${g.resolutions[i - 1]}), got ${r}`,
      });
  });
  const [minX, minY, maxX, maxY] = g.extent;
  if (!(minX < maxX) || !(minY < maxY))
    out.push({
      path: ['extent'],
      message: `must be [minX, minY, maxX, maxY] with min < max (got ${JSON.stringify(g.extent)})`,
    });
  if (g.origin[0] > minX || g.origin[1] < maxY) {
    out.push({
      path: ['origin'],
      message: `must be the top-left corner of the extent or beyond it (x <= ${minX}, y >= ${maxY}; got ${JSON.stringify(g.origin)})`,
    });
  }
  if (g.origins !== undefined) {
    if (g.origins.length !== g.resolutions.length)
      out.push({
        path: ['origins'],
        message: `must give one corner per resolution (${g.resolutions.length}), got ${g.origins.length}`,
      });
    const [o0] = g.origins;
    if (o0 && (o0[0] !== g.origin[0] || o0[1] !== g.origin[1]))
      out.push({
        path: ['origins', 0],
        message: `must be the origin, level 0's corner (${JSON.stringify(g.origin)}), got ${JSON.stringify(o0)}`,
      });
    g.origins.forEach((o, i) => {
      if (o[0] > minX || o[1] < maxY)
        out.push({
          path: ['origins', i],
          message: `must be the top-left corner of the extent or beyond it (x <= ${minX}, y >= ${maxY}; got ${JSON.stringify(o)})`,
        });
    });
  }
  return out;
}
