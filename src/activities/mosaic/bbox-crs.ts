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

export function bboxInGrid(bbox: [number, number, number, number], crs: string, grid: GridDef, what: string): Bounds {
  const [w, s, e, n] = bbox;
  if (crs === grid.crs) return { minX: w, minY: s, maxX: e, maxY: n };
  if (crs !== 'EPSG:4326') {
    throw new ConfigError(what, [`crs: the source's grid is in ${grid.crs}; give the bbox in ${grid.crs} or in EPSG:4326 (got ${JSON.stringify(crs)})`]);
  }
  const code = epsgCode(grid.crs);
  const definition = grid.proj4 ?? (code !== null ? KNOWN_CRS[code]?.proj4 : undefined);
  if (definition === undefined) {
    throw new ConfigError(what, [`crs: a bbox in EPSG:4326 needs ${grid.crs}'s definition: give the source's grid a proj4 string, or the bbox in ${grid.crs}`]);
  }
  let forward: (p: [number, number]) => number[];
  try {
    const converter = proj4('EPSG:4326', definition);
    forward = (p) => converter.forward(p);
  } catch {
    throw new ConfigError(what, [`grid.proj4: not a PROJ definition proj4js reads, for ${grid.crs}`]);
  }
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
      let x: number | undefined;
      let y: number | undefined;
      try {
        [x, y] = forward(p);
      } catch {
        x = NaN;
      }
      if (!Number.isFinite(x) || !Number.isFinite(y)) throw new ConfigError(what, [`bbox: ${JSON.stringify(bbox)} does not project into ${grid.crs} (at ${p.join(', ')})`]);
      minX = Math.min(minX, x!);
      maxX = Math.max(maxX, x!);
      minY = Math.min(minY, y!);
      maxY = Math.max(maxY, y!);
    }
  }
  return { minX, minY, maxX, maxY };
}
