/**
 * mapcache_seed (Debian's mapcache-tools) for bench:seeders: mapcache.xml (a wms source at the counting proxy,
 * a disk cache, the built-in GoogleMapsCompatible grid, built-in format PNG: 24-bit, no quantization) and
 * `mapcache_seed -c mapcache.xml -t layer -g GoogleMapsCompatible -z Z,Z -e minx,miny,maxx,maxy -n N`.
 *
 * - Metatiles: `<metatile>m m</metatile>` with `<metabuffer>b</metabuffer>`; one tile per request is
 *   `<metatile>1 1</metatile>` and `<metabuffer>0</metabuffer>` (mapcache's own defaults).
 * - The disk template uses {inv_y}: mapcache's GoogleMapsCompatible rows count from the bottom (TMS), inv_y is
 *   the XYZ row, so the files are at <z>/<x>/<xyz y>.png like the others'.
 * - Coverage: mapcache_seed turns -e into tile limits with floor/ceil (exclusive max), then aligns them to
 *   metatiles with `max = (max / m + 1) * m` (util/mapcache_seed.c, 1.14): when the exclusive max is already
 *   a multiple of m, that adds a whole metatile column (east) and row (north) beyond the extent. `mapcacheExtent`
 *   compensates: on an axis where the set's exclusive max is a multiple of m, it pulls the extent's max edge in
 *   by one tile, so the aligned limit lands exactly on the set's edge. One tile per request needs no correction.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { resolution, tileBounds } from '../../src/geo/mercator';
import type { TileSet } from './tileset';

export interface MapcacheConfig {
  dir: string;
  wmsUrl: string;
  layers: string;
  metatile: { size: number; buffer: number } | null;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function writeMapcacheConfig(c: MapcacheConfig): { xml: string; tileRoot: string } {
  const tileRoot = path.join(c.dir, 'tiles');
  const locks = path.join(c.dir, 'locks');
  mkdirSync(locks, { recursive: true });
  const m = c.metatile ? c.metatile.size : 1;
  const b = c.metatile ? c.metatile.buffer : 0;
  const xml = `<?xml version="1.0" encoding="UTF-8"?>
<mapcache>
  <cache name="disk" type="disk" layout="template">
    <template>${esc(tileRoot)}/{z}/{x}/{inv_y}.{ext}</template>
  </cache>
  <source name="wms" type="wms">
    <getmap>
      <params>
        <FORMAT>image/png</FORMAT>
        <LAYERS>${esc(c.layers)}</LAYERS>
        <TRANSPARENT>false</TRANSPARENT>
      </params>
    </getmap>
    <http>
      <url>${esc(c.wmsUrl)}</url>
      <connection_timeout>30</connection_timeout>
      <timeout>600</timeout>
    </http>
  </source>
  <tileset name="layer">
    <source>wms</source>
    <cache>disk</cache>
    <grid>GoogleMapsCompatible</grid>
    <format>PNG</format>
    <metatile>${m} ${m}</metatile>
    <metabuffer>${b}</metabuffer>
  </tileset>
  <locker type="disk">
    <directory>${esc(locks)}</directory>
  </locker>
  <service type="wms" enabled="false"/>
  <service type="wmts" enabled="false"/>
  <log_level>warn</log_level>
</mapcache>
`;
  const file = path.join(c.dir, 'mapcache.xml');
  writeFileSync(file, xml);
  return { xml: file, tileRoot };
}

/**
 * The -e extent that makes mapcache_seed seed exactly `ts` with metatiles of `meta` (see the header): the set's
 * bounds shrunk by a quarter pixel, and on an axis whose exclusive max limit (in mapcache's bottom-origin rows
 * for y) is a multiple of meta, its max edge pulled in by one more tile.
 */
export function mapcacheExtent(
  ts: TileSet,
  meta: number,
): { extent: [number, number, number, number]; corrected: string[] } {
  const q = resolution(ts.z) / 4;
  const nw = tileBounds(ts.z, ts.xMin, ts.yMin);
  const se = tileBounds(ts.z, ts.xMax, ts.yMax);
  let maxX = se.maxX - q;
  let maxY = nw.maxY - q;
  const corrected: string[] = [];
  if (meta > 1) {
    const xEnd = ts.xMax + 1; // exclusive, columns from the west
    const yEnd = 2 ** ts.z - ts.yMin; // exclusive, TMS rows from the south: the north edge
    if (xEnd % meta === 0) {
      maxX = tileBounds(ts.z, ts.xMax - 1, ts.yMax).maxX - q;
      corrected.push('-e east edge pulled in 1 tile');
    }
    if (yEnd % meta === 0) {
      maxY = tileBounds(ts.z, ts.xMin, ts.yMin + 1).maxY - q;
      corrected.push('-e north edge pulled in 1 tile');
    }
  }
  return { extent: [nw.minX + q, se.minY + q, maxX, maxY], corrected };
}

/** mapcache_seed's default drill-down iteration refuses metatiles that are not a power of two: scanline then. */
export function mapcacheSeedArgs(
  xml: string,
  ts: TileSet,
  extent: [number, number, number, number],
  concurrency: number,
  meta: number,
): string[] {
  const scanline = (meta & (meta - 1)) !== 0 ? ['-i', 'scanline'] : [];
  return [
    '-c',
    xml,
    '-t',
    'layer',
    '-g',
    'GoogleMapsCompatible',
    '-z',
    `${ts.z},${ts.z}`,
    '-e',
    extent.join(','),
    '-n',
    String(concurrency),
    ...scanline,
    '-q',
  ];
}
