/**
 * A request's bbox in the source grid's CRS: given in that CRS it is taken as it is; given in degrees
 * (EPSG:4326) it is reprojected with proj4js, its edges sampled so a curved edge's bulge is inside the box.
 */
import proj4 from 'proj4';
import { ConfigError } from '../../breaker/config-error';
import { KNOWN_CRS, epsgCode } from '../../geo/crs';
import type { GridDef } from '../../geo/grid';
import type { Bounds } from '../../geo/mercator';

/** Points sampled along each edge of a bbox in degrees. */
const EDGE_SAMPLES = 32;

/** Positions in degrees to the grid's CRS (proj4js), or null when `crs` is the grid's own. */
export function toGridCrs(
  crs: string,
  grid: GridDef,
  what: string,
  field = 'bbox',
): ((p: [number, number]) => [number, number]) | null {
  if (crs === grid.crs) return null;
  if (crs !== 'EPSG:4326') {
    throw new ConfigError(what, [
      `crs: the source's grid is in ${grid.crs}; give the ${field} in ${grid.crs} or in EPSG:4326 (got ${JSON.stringify(crs)})`,
    ]);
  }
  const code = epsgCode(grid.crs);
  const definition = grid.proj4 ?? (code !== null ? KNOWN_CRS[code]?.proj4 : undefined);
  if (definition === undefined) {
    throw new ConfigError(what, [
      `crs: a ${field} in EPSG:4326 needs ${grid.crs}'s definition: give the source's grid a proj4 string, or the ${field} in ${grid.crs}`,
    ]);
  }
  let converter: proj4.Converter;
  try {
    converter = proj4('EPSG:4326', definition);
  } catch {
    throw new ConfigError(what, [`grid.proj4: not a PROJ definition proj4js reads, for ${grid.crs}`]);
  }
  return (p) => {
    let out: number[] = [];
    try {
      out = converter.forward(p);
    } catch {
      // Out of the projection's domain: refused below like a non-finite answer.
    }
    const [x, y] = out;
    if (x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y))
      throw new ConfigError(what, [`${field}: does not project into ${grid.crs} (at ${p.join(', ')})`]);
    return [x, y];
  };
}

export function bboxInGrid(bbox: [number, number, number, number], crs: string, grid: GridDef, what: string): Bounds {
  const [w, s, e, n] = bbox;
  const forward = toGridCrs(crs, grid, what);
  if (forward === null) return { minX: w, minY: s, maxX: e, maxY: n };
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (let k = 0; k <= EDGE_SAMPLES; k++) {
    const t = k / EDGE_SAMPLES;
    for (const p of [
      [w + (e - w) * t, s],
      [w + (e - w) * t, n],
      [w, s + (n - s) * t],
      [e, s + (n - s) * t],
    ] as [number, number][]) {
      let x: number;
      let y: number;
      try {
        [x, y] = forward(p);
      } catch {
        throw new ConfigError(what, [
          `bbox: ${JSON.stringify(bbox)} does not project into ${grid.crs} (at ${p.join(', ')})`,
        ]);
      }
      minX = Math.min(minX, x);
      maxX = Math.max(maxX, x);
      minY = Math.min(minY, y);
      maxY = Math.max(maxY, y);
    }
  }
  return { minX, minY, maxX, maxY };
}
