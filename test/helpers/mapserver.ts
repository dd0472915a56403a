import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { adopt } from '../../src/demo/children';

/**
 * A real WMS on loopback: MapServer 8 from Debian (cgi-mapserver) behind lighttpd (a CGI front that passes
 * MapServer's status codes through), with a small fixture made for the test: a georeferenced raster of four
 * coloured quadrants with a gradient (gdal_translate) and a vector layer of roads (ogr2ogr to GeoPackage).
 * `.ci/run` installs the packages; `available()` says whether this machine has them.
 */
export interface Wms {
  /** GetMap base URL: http://127.0.0.1:<port>/cgi-bin/mapserv (the mapfile is set by the server's config). */
  url: string;
  /** The raster's extent in its CRS (EPSG:3857 unless `epsg` said otherwise): [minX, minY, maxX, maxY]. */
  extent: [number, number, number, number];
  /**
   * Renames a layer in the mapfile (a mapfile being redeployed): MapServer's CGI reads the mapfile on every
   * request, so from the next request on the old name is LayerNotDefined. Written whole, then renamed in place.
   */
  renameLayer(from: string, to: string): void;
  /** A second lighttpd and MapServer on another port serving the same mapfile (an identical mirror). */
  startTwin(): Promise<{ url: string; stop(): Promise<void> }>;
  stop(): Promise<void>;
}

const MAPSERV = '/usr/lib/cgi-bin/mapserv';
const LIGHTTPD = '/usr/sbin/lighttpd';

export function wmsAvailable(): boolean {
  return (
    existsSync(MAPSERV) &&
    existsSync(LIGHTTPD) &&
    existsSync('/usr/bin/gdal_translate') &&
    existsSync('/usr/bin/ogr2ogr')
  );
}

// Around Null Island: 2 x 2 km in EPSG:3857.
const DEFAULT_EXTENT: [number, number, number, number] = [0, 0, 2000, 2000];

/**
 * `extent`: where the 512 px fixture raster lies (EPSG:3857). Aligned on a zoom's tile grid at a whole
 * multiple of its resolution, nearest-neighbour rendering has no ties, so any two requests of one pixel agree.
 */
export async function startWms(opts: { extent?: [number, number, number, number]; epsg?: number } = {}): Promise<Wms> {
  const EXTENT = opts.extent ?? DEFAULT_EXTENT;
  // The fixture's CRS (3857 unless told): the raster, the roads and the map are in it, and GetMap takes it.
  const EPSG = opts.epsg ?? 3857;
  // The roads cross the default extent (in EPSG:3857 they stay there whatever the raster's extent, as the
  // tests that use it expect), or the raster's own extent in another CRS.
  const [x0, y0, x1, y1] = opts.epsg === undefined ? DEFAULT_EXTENT : EXTENT;
  const at = (fx: number, fy: number) => [x0 + (x1 - x0) * fx, y0 + (y1 - y0) * fy];
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-wms-'));
  // Raster: NE red, NW green, SW blue, SE yellow, each with a gradient so no tile is uniform.
  const size = 512;
  const raw = Buffer.alloc(size * size * 3);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 3;
      const east = x >= size / 2;
      const north = y < size / 2;
      const shade = (x + y) % 64;
      const [r, g, b] = north
        ? east
          ? [255, shade, shade]
          : [shade, 255, shade]
        : east
          ? [255, 255, shade]
          : [shade, shade, 255];
      raw[i] = r;
      raw[i + 1] = g;
      raw[i + 2] = b;
    }
  }
  await sharp(raw, { raw: { width: size, height: size, channels: 3 } })
    .png()
    .toFile(path.join(dir, 'quadrants.png'));
  execFileSync(
    'gdal_translate',
    [
      '-q',
      '-of',
      'GTiff',
      '-a_srs',
      `EPSG:${EPSG}`,
      '-a_ullr',
      String(EXTENT[0]),
      String(EXTENT[3]),
      String(EXTENT[2]),
      String(EXTENT[1]),
      'quadrants.png',
      'quadrants.tif',
    ],
    { cwd: dir },
  );
  writeFileSync(
    path.join(dir, 'roads.geojson'),
    JSON.stringify({
      type: 'FeatureCollection',
      features: [
        {
          type: 'Feature',
          properties: { name: 'Diagonal' },
          geometry: {
            type: 'LineString',
            coordinates: [at(0, 0), at(1, 1)],
          },
        },
        {
          type: 'Feature',
          properties: { name: 'Cross' },
          geometry: {
            type: 'LineString',
            coordinates: [at(0, 0.75), at(1, 0.25)],
          },
        },
      ],
    }),
  );
  execFileSync('ogr2ogr', ['-q', '-f', 'GPKG', '-a_srs', `EPSG:${EPSG}`, 'roads.gpkg', 'roads.geojson'], { cwd: dir });
  const mapfile = path.join(dir, 'fixture.map');
  writeFileSync(
    mapfile,
    `MAP
  NAME "fixture"
  EXTENT ${EXTENT.join(' ')}
  SIZE 256 256
  UNITS ${EPSG === 4326 ? 'DD' : 'METERS'}
  SHAPEPATH "${dir}"
  IMAGETYPE png
  PROJECTION "init=epsg:${EPSG}" END
  WEB
    METADATA
      "wms_title" "tilebreaker fixture"
      "wms_onlineresource" "http://127.0.0.1/cgi-bin/mapserv?"
      "wms_srs" "${EPSG === 3857 || EPSG === 4326 ? '' : `EPSG:${EPSG} `}EPSG:3857 EPSG:4326 CRS:84"
      "wms_enable_request" "*"
    END
  END
  LAYER
    NAME "quadrants"
    TYPE RASTER
    STATUS ON
    DATA "quadrants.tif"
    PROJECTION "init=epsg:${EPSG}" END
    METADATA "wms_title" "quadrants" END
  END
  LAYER
    NAME "roads"
    TYPE LINE
    STATUS ON
    CONNECTIONTYPE OGR
    CONNECTION "roads.gpkg"
    DATA "roads"
    PROJECTION "init=epsg:${EPSG}" END
    METADATA "wms_title" "roads" END
    CLASS STYLE COLOR 0 0 0 WIDTH 3 END END
  END
  # The roads again with two WMS styles (STYLES selects the class group): "black" as above, and "red".
  LAYER
    NAME "roads-styled"
    TYPE LINE
    STATUS ON
    CONNECTIONTYPE OGR
    CONNECTION "roads.gpkg"
    DATA "roads"
    PROJECTION "init=epsg:${EPSG}" END
    METADATA "wms_title" "roads-styled" END
    CLASSGROUP "black"
    CLASS GROUP "black" STYLE COLOR 0 0 0 WIDTH 3 END END
    CLASS GROUP "red" STYLE COLOR 255 0 0 WIDTH 3 END END
  END
END
`,
  );
  const config = path.join(dir, 'mapserver.conf');
  writeFileSync(config, `CONFIG\n  ENV\n    MS_MAP_PATTERN "^${dir}"\n    MS_MAPFILE "${mapfile}"\n  END\nEND\n`);
  const { url, child } = await startMapservCgi(dir, config);
  const twins: ChildProcess[] = [];
  const stopChild = async (c: ChildProcess) => {
    if (c.exitCode !== null || c.signalCode !== null) return;
    c.kill('SIGTERM');
    await new Promise((r) => c.once('exit', r));
  };
  return {
    url,
    extent: EXTENT,
    renameLayer: (from, to) => {
      const text = readFileSync(mapfile, 'utf8');
      const renamed = text.replace(`NAME "${from}"`, `NAME "${to}"`);
      if (renamed === text) throw new Error(`no layer ${JSON.stringify(from)} in the fixture's mapfile`);
      writeFileSync(`${mapfile}.tmp`, renamed);
      renameSync(`${mapfile}.tmp`, mapfile);
    },
    startTwin: async () => {
      const twinDir = mkdtempSync(path.join(dir, 'twin-'));
      const twin = await startMapservCgi(twinDir, config);
      twins.push(twin.child);
      return { url: twin.url, stop: () => stopChild(twin.child) };
    },
    stop: async () => {
      for (const c of [...twins, child]) await stopChild(c);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * lighttpd on 127.0.0.1 in front of Debian's mapserv CGI (a CGI front passes MapServer's status codes through),
 * with `configFile` as MAPSERVER_CONFIG_FILE; `extra` adds lighttpd settings.
 */
export async function startMapservCgi(
  dir: string,
  configFile: string,
  extra = '',
): Promise<{ url: string; port: number; child: ChildProcess }> {
  const port = await freePort();
  const conf = path.join(dir, 'lighttpd.conf');
  writeFileSync(
    conf,
    `server.modules = ("mod_cgi", "mod_setenv", "mod_alias")
server.document-root = "${dir}"
server.bind = "127.0.0.1"
server.port = ${port}
server.errorlog = "${dir}/lighttpd-error.log"
server.pid-file = "${dir}/lighttpd.pid"
${extra}alias.url = ("/cgi-bin/mapserv" => "${MAPSERV}")
cgi.assign = ("" => "")
setenv.add-environment = ("MAPSERVER_CONFIG_FILE" => "${configFile}")
`,
  );
  // Killed as this process exits, should it end before stopping it (a bench stopped with Ctrl-C).
  const child: ChildProcess = adopt(spawn(LIGHTTPD, ['-D', '-f', conf], { stdio: 'ignore' }));
  await waitForPort(port, child);
  return { url: `http://127.0.0.1:${port}/cgi-bin/mapserv`, port, child };
}

/** A free TCP port on 127.0.0.1 (for servers that must be told their port). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Resolves once `child` listens on 127.0.0.1:`port`; rejects if it exits first. */
export async function waitForPort(port: number, child: ChildProcess): Promise<void> {
  const { connect } = await import('node:net');
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`lighttpd exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const sock = connect(port, '127.0.0.1', () => {
        sock.destroy();
        resolve(true);
      });
      sock.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`lighttpd did not listen on ${port}`);
}
