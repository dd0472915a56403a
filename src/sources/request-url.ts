import { epsgCode, KNOWN_CRS, northingFirst } from '../geo/crs';
import { gridTileBounds } from '../geo/grid';
import { tileBounds, tmsY, type Bounds } from '../geo/mercator';
import type { SourceConfig } from './schema';

/** A tile address on the XYZ grid (rows from the top). */
export interface TileAddress {
  z: number;
  x: number;
  y: number;
}

/**
 * The request URL for one tile of a source (no credentials: those are added by the fetcher from the
 * environment). WMS sources get a GetMap for the tile's EPSG:3857 bounds.
 */
export function tileUrl(source: SourceConfig, t: TileAddress): string {
  switch (source.type) {
    case 'xyz':
    case 'tms': {
      const row = source.type === 'tms' ? tmsY(t.z, t.y) : t.y;
      const sub = source.subdomains?.length ? source.subdomains[(t.x + t.y) % source.subdomains.length]! : '';
      return fill(source.url, { z: t.z, x: t.x, y: row, s: sub, '-y': tmsY(t.z, t.y) });
    }
    case 'wmts-rest':
      return fill(source.url, {
        TileMatrix: source.tileMatrices?.[t.z] ?? t.z,
        TileRow: t.y,
        TileCol: t.x,
        Style: source.style,
        TileMatrixSet: source.tileMatrixSet,
      });
    case 'wmts-kvp':
      return withParams(source.url, {
        SERVICE: 'WMTS',
        REQUEST: 'GetTile',
        VERSION: '1.0.0',
        LAYER: source.layer,
        STYLE: source.style,
        TILEMATRIXSET: source.tileMatrixSet,
        TILEMATRIX: source.tileMatrices?.[t.z] ?? `${source.tileMatrixPrefix}${t.z}`,
        TILEROW: String(t.y),
        TILECOL: String(t.x),
        FORMAT: source.format,
      });
    case 'wms':
      return getMapUrl(source, sourceTileBounds(source, t), source.tileSize, source.tileSize);
  }
}

/** A tile's bounds in the source's CRS: its own grid's, or Web Mercator's. */
export function sourceTileBounds(source: SourceConfig, t: TileAddress): Bounds {
  return source.grid ? gridTileBounds(source.grid, t.z, t.x, t.y, source.tileSize) : tileBounds(t.z, t.x, t.y);
}

/**
 * A WMS GetMap URL for `bbox` in the source's CRS (its grid's, projected: easting then northing, but in 1.3.0
 * northing first for a CRS whose axes are so ordered) at `width` x `height` pixels. 1.1.1 names the CRS `SRS`, 1.3.0 `CRS`;
 * EPSG:3857 is easting/northing in both (only geographic CRSs such as EPSG:4326 swap to lat/lon in 1.3.0).
 */
export function getMapUrl(
  source: Extract<SourceConfig, { type: 'wms' }>,
  bbox: Bounds,
  width: number,
  height: number,
): string {
  return withParams(source.url, {
    ...source.params,
    SERVICE: 'WMS',
    REQUEST: 'GetMap',
    VERSION: source.version,
    LAYERS: source.layers.join(','),
    STYLES: source.styles.join(','),
    [source.version === '1.3.0' ? 'CRS' : 'SRS']: source.grid?.crs ?? source.crs,
    // 1.3.0 writes BBOX in the CRS's axis order: LAEA Europe (EPSG:3035) and a few others put northing first.
    BBOX: (source.version === '1.3.0' && source.grid && northingFirst(source.grid.crs, source.grid.axisOrder)
      ? [bbox.minY, bbox.minX, bbox.maxY, bbox.maxX]
      : [bbox.minX, bbox.minY, bbox.maxX, bbox.maxY]
    )
      .map(source.grid && KNOWN_CRS[epsgCode(source.grid.crs) ?? 0]?.geographic ? degrees : coord)
      .join(','),
    WIDTH: String(width),
    HEIGHT: String(height),
    FORMAT: source.format,
    TRANSPARENT: source.transparent ? 'TRUE' : 'FALSE',
    // Errors as XML documents we can parse, not images that look like tiles.
    EXCEPTIONS: source.version === '1.3.0' ? 'XML' : 'application/vnd.ogc.se_xml',
  });
}

/**
 * A BBOX value for a geographic (lon/lat) box in a given WMS version: 1.3.0 with EPSG:4326 orders axes as the
 * EPSG database does (latitude first); 1.1.1 and CRS:84 keep longitude first.
 */
export function geographicBbox(
  version: '1.1.1' | '1.3.0',
  crs: 'EPSG:4326' | 'CRS:84',
  b: { west: number; south: number; east: number; north: number },
): string {
  const latFirst = version === '1.3.0' && crs === 'EPSG:4326';
  return (latFirst ? [b.south, b.west, b.north, b.east] : [b.west, b.south, b.east, b.north]).map(coord).join(',');
}

function coord(n: number): string {
  // Enough digits for sub-millimetre precision in metres, without float noise in the URL.
  return String(Math.round(n * 1e6) / 1e6);
}

/** A coordinate in degrees: 1e-6 degrees is 11 cm, a pixel's share at deep levels; 12 decimals are a micrometre. */
function degrees(n: number): string {
  return String(Math.round(n * 1e12) / 1e12);
}

function fill(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{(-?\w+)\}/g, (m, name: string) =>
    name in values ? encodeURIComponent(String(values[name])) : m,
  );
}

function withParams(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  // Keep the base URL's own parameters (e.g. map=...), but let ours win over a case-variant duplicate.
  for (const key of [...url.searchParams.keys()]) {
    if (Object.keys(params).some((p) => p.toUpperCase() === key.toUpperCase())) url.searchParams.delete(key);
  }
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}
