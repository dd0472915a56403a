/**
 * The WMS of bench:seeders: MapServer 8 (Debian's cgi-mapserver) behind lighttpd on 127.0.0.1, like the
 * tests' helper, but with a fixture made for seeding benchmarks: a raster at exactly the tile set's resolution
 * (one raster pixel per tile pixel, so every tile has real detail) covering the tile set plus one tile on
 * every side (metatile buffers see data too), and vector layers drawn over it (roads, areas, places with
 * labels) so that edge effects between tiles and metatiles would show.
 *
 * The raster (all deterministic, no randomness that is not seeded):
 *   - a colour gradient over the whole extent (hue with x, brightness with y);
 *   - two octaves of value noise (periods 97 and 23 px) in different channels: no tile is uniform, no two alike;
 *   - concentric rings and one-pixel diagonal hairlines: high-frequency detail that shows any one-pixel shift.
 * It is written as raw bytes + a VRT and turned into a tiled, uncompressed GeoTIFF by gdal_translate.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { resolution, tileBounds } from '../../src/geo/mercator';
import { startMapservCgi } from '../../test/helpers/mapserver';
import type { TileSet } from './tileset';
import { prng } from '../../test/helpers/prng';

export const MAPSERV = '/usr/lib/cgi-bin/mapserv';
export const LIGHTTPD = '/usr/sbin/lighttpd';
const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';

export interface BenchWms {
  /** GetMap base URL of lighttpd itself (the bench puts its counting proxy in front of this). */
  url: string;
  /** The LAYERS parameter that draws everything. */
  layers: string;
  /** Raster extent in EPSG:3857 and its size in pixels. */
  extent: [number, number, number, number];
  rasterPx: number;
  labels: boolean;
  /** lighttpd settings that bound concurrency, as written to its config (for the report). */
  lighttpdNotes: string;
  /** lighttpd's pid: its CPU plus its reaped children's (every mapserv) is the server's CPU. */
  pid: number;
  stop(): Promise<void>;
}

export function missingWmsPackages(): string[] {
  const missing: string[] = [];
  if (!existsSync(MAPSERV)) missing.push('cgi-mapserver');
  if (!existsSync(LIGHTTPD)) missing.push('lighttpd');
  if (!existsSync('/usr/bin/gdal_translate') || !existsSync('/usr/bin/ogr2ogr')) missing.push('gdal-bin');
  return missing;
}

/** A value-noise field (bilinear, smoothstep) with the given period in pixels, values 0..1. */
function valueNoise(size: number, period: number, seed: number): (x: number, y: number) => number {
  const n = Math.ceil(size / period) + 2;
  const rnd = prng(seed);
  const lattice = new Float32Array(n * n);
  for (let i = 0; i < lattice.length; i++) lattice[i] = rnd();
  return (x, y) => {
    const fx = x / period;
    const fy = y / period;
    const ix = Math.floor(fx);
    const iy = Math.floor(fy);
    let tx = fx - ix;
    let ty = fy - iy;
    tx = tx * tx * (3 - 2 * tx);
    ty = ty * ty * (3 - 2 * ty);
    const i = iy * n + ix;
    const a = lattice[i]!;
    const b = lattice[i + 1]!;
    const c = lattice[i + n]!;
    const d = lattice[i + n + 1]!;
    return a + (b - a) * tx + (c - a) * ty + (a - b - c + d) * tx * ty;
  };
}

function writeRaster(file: string, size: number): void {
  const n1 = valueNoise(size, 97, 1);
  const n2 = valueNoise(size, 23, 2);
  const fd = openSync(file, 'w');
  const row = Buffer.alloc(size * 3);
  const c = size / 2;
  for (let y = 0; y < size; y++) {
    const v = y / size;
    for (let x = 0; x < size; x++) {
      const u = x / size;
      const a = n1(x, y);
      const b = n2(x, y);
      const dx = x - c;
      const dy = y - c;
      const ring = (Math.floor(Math.sqrt(dx * dx + dy * dy) / 3) & 7) === 0 ? 40 : 0;
      const hair = (x + y) % 41 === 0 || (x - y + size) % 53 === 0 ? 70 : 0;
      let r = 60 + 140 * u + 50 * a - ring;
      let g = 40 + 120 * (1 - v) + 60 * b - hair;
      let bl = 70 + 90 * v + 60 * (a - b) + ring - hair;
      r = r < 0 ? 0 : r > 255 ? 255 : r;
      g = g < 0 ? 0 : g > 255 ? 255 : g;
      bl = bl < 0 ? 0 : bl > 255 ? 255 : bl;
      const i = x * 3;
      row[i] = r;
      row[i + 1] = g;
      row[i + 2] = bl;
    }
    writeSync(fd, row);
  }
  closeSync(fd);
}

interface Feature {
  type: 'Feature';
  properties: Record<string, string | number>;
  geometry: { type: string; coordinates: unknown };
}

/** Roads (random walks), areas (blobs) and places (points), in EPSG:3857 metres inside `extent`. */
function vectors(
  extent: [number, number, number, number],
  tileM: number,
): { roads: Feature[]; areas: Feature[]; places: Feature[] } {
  const rnd = prng(42);
  const [minX, minY, maxX, maxY] = extent;
  const w = maxX - minX;
  const h = maxY - minY;
  const pt = (): [number, number] => [minX + rnd() * w, minY + rnd() * h];
  const roads: Feature[] = [];
  for (let i = 0; i < 160; i++) {
    let [x, y] = pt();
    let heading = rnd() * Math.PI * 2;
    const coords: [number, number][] = [[x, y]];
    const steps = 4 + Math.floor(rnd() * 10);
    for (let s = 0; s < steps; s++) {
      heading += (rnd() - 0.5) * 1.2;
      const len = tileM * (0.3 + rnd() * 1.5);
      x = Math.min(maxX, Math.max(minX, x + Math.cos(heading) * len));
      y = Math.min(maxY, Math.max(minY, y + Math.sin(heading) * len));
      coords.push([x, y]);
    }
    roads.push({
      type: 'Feature',
      properties: { name: `Road ${i + 1}`, kind: i % 3 },
      geometry: { type: 'LineString', coordinates: coords },
    });
  }
  const areas: Feature[] = [];
  for (let i = 0; i < 70; i++) {
    const [cx, cy] = pt();
    const r0 = tileM * (0.2 + rnd() * 1.2);
    const ring: [number, number][] = [];
    const k = 7 + Math.floor(rnd() * 9);
    for (let j = 0; j < k; j++) {
      const t = (j / k) * Math.PI * 2;
      const r = r0 * (0.6 + rnd() * 0.6);
      ring.push([cx + Math.cos(t) * r, cy + Math.sin(t) * r]);
    }
    ring.push(ring[0]!);
    areas.push({
      type: 'Feature',
      properties: { name: `Area ${i + 1}`, kind: i % 4 },
      geometry: { type: 'Polygon', coordinates: [ring] },
    });
  }
  const places: Feature[] = [];
  for (let i = 0; i < 900; i++)
    places.push({
      type: 'Feature',
      properties: { name: `Place ${i + 1}`, kind: i % 5 },
      geometry: { type: 'Point', coordinates: pt() },
    });
  return { roads, areas, places };
}

function mapfile(dir: string, extent: [number, number, number, number], labels: boolean): string {
  const label = (size: number, extra: string) =>
    labels
      ? `LABEL
        FONT "sans"
        SIZE ${size}
        COLOR 20 20 20
        OUTLINECOLOR 255 255 255
        OUTLINEWIDTH 2
        ${extra}
      END`
      : '';
  return `MAP
  NAME "seeders"
  EXTENT ${extent.join(' ')}
  SIZE 256 256
  MAXSIZE 4096
  UNITS METERS
  SHAPEPATH "${dir}"
  ${labels ? `FONTSET "${dir}/fonts.txt"` : ''}
  IMAGECOLOR 255 255 255
  IMAGETYPE png
  PROJECTION "init=epsg:3857" END
  OUTPUTFORMAT
    NAME "png"
    DRIVER AGG/PNG
    MIMETYPE "image/png"
    IMAGEMODE RGB
    EXTENSION "png"
  END
  SYMBOL NAME "circle" TYPE ELLIPSE FILLED TRUE POINTS 1 1 END END
  WEB
    METADATA
      "wms_title" "tilebreaker bench:seeders fixture"
      "wms_onlineresource" "http://127.0.0.1/cgi-bin/mapserv?"
      "wms_srs" "EPSG:3857"
      "wms_enable_request" "*"
    END
  END
  LAYER
    NAME "raster"
    TYPE RASTER
    STATUS ON
    DATA "raster.tif"
    PROJECTION "init=epsg:3857" END
    METADATA "wms_title" "raster" END
  END
  LAYER
    NAME "areas"
    TYPE POLYGON
    STATUS ON
    CONNECTIONTYPE OGR
    CONNECTION "vectors.gpkg"
    DATA "areas"
    PROJECTION "init=epsg:3857" END
    METADATA "wms_title" "areas" END
    CLASSITEM "kind"
    CLASS EXPRESSION "0" STYLE COLOR 170 211 223 OPACITY 60 OUTLINECOLOR 40 90 160 WIDTH 2 END END
    CLASS EXPRESSION "1" STYLE COLOR 200 230 180 OPACITY 60 OUTLINECOLOR 60 120 40 WIDTH 2 END END
    CLASS EXPRESSION "2" STYLE COLOR 240 200 160 OPACITY 50 OUTLINECOLOR 150 90 40 WIDTH 1 END END
    CLASS STYLE COLOR 220 220 220 OPACITY 40 OUTLINECOLOR 80 80 80 WIDTH 1 END END
  END
  LAYER
    NAME "roads"
    TYPE LINE
    STATUS ON
    CONNECTIONTYPE OGR
    CONNECTION "vectors.gpkg"
    DATA "roads"
    PROJECTION "init=epsg:3857" END
    METADATA "wms_title" "roads" END
    LABELITEM "name"
    CLASSITEM "kind"
    CLASS
      EXPRESSION "0"
      STYLE COLOR 90 60 20 WIDTH 6 END
      STYLE COLOR 250 200 90 WIDTH 4 END
      ${label(9, 'ANGLE FOLLOW\n        REPEATDISTANCE 300')}
    END
    CLASS
      EXPRESSION "1"
      STYLE COLOR 60 60 60 WIDTH 4 END
      STYLE COLOR 255 255 255 WIDTH 2 END
      ${label(8, 'ANGLE FOLLOW')}
    END
    CLASS STYLE COLOR 30 30 30 WIDTH 1.5 PATTERN 6 4 END END END
  END
  LAYER
    NAME "places"
    TYPE POINT
    STATUS ON
    CONNECTIONTYPE OGR
    CONNECTION "vectors.gpkg"
    DATA "places"
    PROJECTION "init=epsg:3857" END
    METADATA "wms_title" "places" END
    LABELITEM "name"
    CLASS
      STYLE SYMBOL "circle" SIZE 7 COLOR 200 30 30 OUTLINECOLOR 255 255 255 WIDTH 1 END
      ${label(8, 'POSITION AUTO\n        OFFSET 4 4')}
    END
  END
END
`;
}

/** Starts MapServer behind lighttpd with the fixture for `ts`; the raster covers it plus one tile each side. */
export async function startBenchWms(ts: TileSet): Promise<BenchWms> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-seeders-wms-'));
  const res = resolution(ts.z);
  const nw = tileBounds(ts.z, ts.xMin - 1, ts.yMin - 1);
  const se = tileBounds(ts.z, ts.xMax + 1, ts.yMax + 1);
  const extent: [number, number, number, number] = [nw.minX, se.minY, se.maxX, nw.maxY];
  const size = (ts.xMax - ts.xMin + 3) * 256;
  if ((ts.yMax - ts.yMin + 3) * 256 !== size) throw new Error('bench:seeders: the tile set must be square');
  writeRaster(path.join(dir, 'raster.raw'), size);
  writeFileSync(
    path.join(dir, 'raster.vrt'),
    `<VRTDataset rasterXSize="${size}" rasterYSize="${size}">
${[1, 2, 3]
  .map(
    (b) => `  <VRTRasterBand dataType="Byte" band="${b}" subClass="VRTRawRasterBand">
    <SourceFilename relativeToVRT="1">raster.raw</SourceFilename>
    <ImageOffset>${b - 1}</ImageOffset><PixelOffset>3</PixelOffset><LineOffset>${size * 3}</LineOffset>
  </VRTRasterBand>`,
  )
  .join('\n')}
</VRTDataset>
`,
  );
  execFileSync(
    'gdal_translate',
    [
      '-q',
      '-of',
      'GTiff',
      '-co',
      'TILED=YES',
      '-co',
      'INTERLEAVE=PIXEL',
      '-a_srs',
      'EPSG:3857',
      '-a_ullr',
      String(extent[0]),
      String(extent[3]),
      String(extent[2]),
      String(extent[1]),
      'raster.vrt',
      'raster.tif',
    ],
    { cwd: dir },
  );
  rmSync(path.join(dir, 'raster.raw'));
  const v = vectors(extent, res * 256);
  for (const [name, features] of Object.entries(v)) {
    writeFileSync(path.join(dir, `${name}.geojson`), JSON.stringify({ type: 'FeatureCollection', features }));
    execFileSync(
      'ogr2ogr',
      [
        '-q',
        '-f',
        'GPKG',
        '-a_srs',
        'EPSG:3857',
        ...(name === 'roads' ? [] : ['-update']),
        '-nln',
        name,
        'vectors.gpkg',
        `${name}.geojson`,
      ],
      { cwd: dir },
    );
  }
  const labels = existsSync(FONT);
  if (labels) writeFileSync(path.join(dir, 'fonts.txt'), `sans ${FONT}\n`);
  const map = path.join(dir, 'seeders.map');
  writeFileSync(map, mapfile(dir, extent, labels));
  const config = path.join(dir, 'mapserver.conf');
  writeFileSync(config, `CONFIG\n  ENV\n    MS_MAP_PATTERN "^${dir}"\n    MS_MAPFILE "${map}"\n  END\nEND\n`);
  // lighttpd 1.4 is one event-loop process (server.max-worker is deprecated and left at its default 0) that
  // forks one mapserv per CGI request with no cap of its own on concurrent CGI children; the limits that
  // could bite are connections, so they are set far above the bench's concurrency.
  const lighttpdNotes =
    'one lighttpd process, mod_cgi forks a mapserv per request (no CGI cap), server.max-connections 1024, server.max-keep-alive-requests 100000';
  const { url, child } = await startMapservCgi(
    dir,
    config,
    // Concurrency 4 must really be 4 in flight: one lighttpd process, keep-alive never cut short.
    'server.max-connections = 1024\nserver.max-fds = 4096\nserver.max-keep-alive-requests = 100000\nserver.max-keep-alive-idle = 60\n',
  );
  return {
    url,
    layers: 'raster,areas,roads,places',
    extent,
    rasterPx: size,
    labels,
    lighttpdNotes,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
