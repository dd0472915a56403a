import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadSource } from '../../src/activities/sources-file';
import { sourcesFromCapabilities } from '../../src/client/capabilities';
import { packageRoot } from '../../src/client/local-server';
import { tileUrl } from '../../src/sources/request-url';
import { parseSource } from '../../src/sources/schema';
import { freePort, startWms, wmsAvailable } from '../helpers/mapserver';

// `tilebreaker sources import`: sources from capabilities documents. The WMTS documents are MapProxy's own
// (mapproxy-util serve-develop with a Web Mercator grid and Swiss LV95, saved under test/fixtures); the WMS
// document comes live from MapServer.

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const fixtures = path.join(packageRoot(), 'test', 'fixtures', 'capabilities');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-import-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, out, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

const LV95 = {
  crs: 'EPSG:2056',
  origin: [2_420_000, 1_350_000],
  resolutions: [4000, 2000, 1000, 500, 250, 100, 50, 20, 10, 5, 2.5],
  extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
};
const MATRICES = (n: number) => Array.from({ length: n }, (_, i) => String(i).padStart(2, '0'));

describe('sources from a WMTS capabilities document (MapProxy)', () => {
  test('RESTful: each layer and matrix set a wmts-rest source; LV95 becomes a grid, Web Mercator none; matrix identifiers kept', async () => {
    const file = path.join(dir, 'rest.yaml');
    const r = await cli(['sources', 'import', path.join(fixtures, 'mapproxy-wmts-rest.xml'), '--out', file]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /3 sources written to/);
    const relief = await loadSource(file, 'relief');
    assert.equal(relief.source.type, 'wmts-rest');
    assert.deepEqual(relief.source.grid, LV95);
    assert.deepEqual([relief.source.minZoom, relief.source.maxZoom, relief.source.format], [0, 10, 'image/png']);
    // MapProxy names its matrices "00", "01", ...: the URL carries the identifier, not the level's number.
    assert.equal(tileUrl(relief.source, { z: 3, x: 1, y: 0 }), 'http://127.0.0.1:8091/wmts/relief/lv95/03/1/0.png');
    const mercator = await loadSource(file, 'basemap-GLOBAL_WEBMERCATOR');
    assert.equal(mercator.source.grid, undefined);
    assert.deepEqual([mercator.source.maxZoom, mercator.source.format], [19, 'image/jpeg']);
    assert.deepEqual((mercator.source as { tileMatrices?: string[] }).tileMatrices, MATRICES(20));
    assert.deepEqual((await loadSource(file, 'basemap-lv95')).source.grid, LV95);
    // A second import into the same file is refused without --force.
    const again = await cli(['sources', 'import', path.join(fixtures, 'mapproxy-wmts-rest.xml'), '--out', file]);
    assert.equal(again.code, 2);
    assert.match(again.err, /rest\.yaml exists; give --force to replace it/);
  });

  test('KVP: wmts-kvp sources at the GetTile endpoint, TILEMATRIX the identifier', () => {
    const { sources, notes } = sourcesFromCapabilities(
      readFileSync(path.join(fixtures, 'mapproxy-wmts-kvp.xml'), 'utf8'),
      'http://127.0.0.1:8091/service',
    );
    assert.deepEqual(notes, []);
    const relief = parseSource(sources.relief);
    assert.equal(relief.type, 'wmts-kvp');
    const url = new URL(tileUrl(relief, { z: 8, x: 70, y: 56 }));
    assert.equal(url.origin + url.pathname, 'http://127.0.0.1:8091/service');
    assert.deepEqual(
      ['LAYER', 'TILEMATRIXSET', 'TILEMATRIX', 'TILECOL', 'TILEROW', 'FORMAT'].map((k) => url.searchParams.get(k)),
      ['relief', 'lv95', '08', '70', '56', 'image/png'],
    );
  });

  test('a matrix set in EPSG:4326 (MapProxy, corners latitude first, scales in degrees): a grid in degrees, longitude first; a CRS84 set reads its corners the other way round', () => {
    const xml = readFileSync(path.join(fixtures, 'mapproxy-wmts-wgs84-rest.xml'), 'utf8');
    const { sources, notes } = sourcesFromCapabilities(xml, 'x');
    assert.deepEqual(notes, []);
    const res = Array.from({ length: 8 }, (_, z) => 0.703125 / 2 ** z);
    assert.deepEqual(sources.world?.grid, {
      crs: 'EPSG:4326',
      origin: [-180, 90],
      resolutions: res,
      extent: [-180, -90, 180, 90],
    });
    const world = parseSource(sources.world);
    assert.equal(tileUrl(world, { z: 7, x: 134, y: 30 }), 'http://127.0.0.1:8091/wmts/world/wgs84/07/134/30.png');
    const crs84 = sourcesFromCapabilities(
      xml
        .replace(
          '<ows:SupportedCRS>EPSG:4326</ows:SupportedCRS>',
          '<ows:SupportedCRS>urn:ogc:def:crs:OGC:1.3:CRS84</ows:SupportedCRS>',
        )
        .replaceAll('<TopLeftCorner>90.0 -180.0</TopLeftCorner>', '<TopLeftCorner>-180.0 90.0</TopLeftCorner>'),
      'x',
    );
    assert.deepEqual(crs84.sources.world?.grid, sources.world?.grid);
  });

  test('what cannot become a source is noted, not guessed: a geographic set other than EPSG:4326, not a capabilities document; different corners are kept', async () => {
    const xml = readFileSync(path.join(fixtures, 'mapproxy-wmts-rest.xml'), 'utf8');
    const geographic = sourcesFromCapabilities(
      xml.replace(
        '<ows:SupportedCRS>EPSG:2056</ows:SupportedCRS>',
        '<ows:SupportedCRS>urn:ogc:def:crs:EPSG::4258</ows:SupportedCRS>',
      ),
      'x',
    );
    assert.deepEqual(Object.keys(geographic.sources), ['basemap-GLOBAL_WEBMERCATOR']);
    assert.ok(
      geographic.notes.some((n) =>
        /layer "relief", matrix set "lv95": a geographic CRS \(EPSG:4258\); of those, a source grid takes EPSG:4326 only/.test(
          n,
        ),
      ),
      geographic.notes.join('\n'),
    );
    // A set whose matrices have corners of their own keeps them, level by level.
    const corners = sourcesFromCapabilities(
      xml.replace(
        '<TopLeftCorner>2420000.0 1350000.0</TopLeftCorner>',
        '<TopLeftCorner>2400000.0 1350000.0</TopLeftCorner>',
      ),
      'x',
    );
    const origins = corners.sources.relief?.grid?.origins;
    assert.deepEqual(origins?.slice(0, 2), [
      [2_400_000, 1_350_000],
      [2_420_000, 1_350_000],
    ]);
    assert.deepEqual(corners.sources.relief?.grid?.origin, [2_400_000, 1_350_000]);
    assert.equal(origins?.length, corners.sources.relief?.grid?.resolutions.length);
    // Where each matrix has its own corner, the grid's extent is where all of them have tiles: no level is
    // asked for a column beyond its MatrixWidth.
    const grid = corners.sources.relief?.grid;
    assert.ok(grid?.origins);
    const levels = grid.resolutions.map((r, z) => ({ r, o: grid.origins![z]! }));
    assert.ok(
      levels.every(({ o }) => o[0] <= grid.extent[0] && o[1] >= grid.extent[3]),
      JSON.stringify(grid),
    );
    // A Web Mercator set whose third matrix has a corner of its own is not the quad tree: noted, not imported as it.
    let seen = 0;
    const shifted = xml.replace(/<TopLeftCorner>-20037508\.342789244 20037508\.342789244<\/TopLeftCorner>/g, (m) =>
      ++seen === 3 ? '<TopLeftCorner>-10018754.171394622 20037508.342789244</TopLeftCorner>' : m,
    );
    const mercator = sourcesFromCapabilities(shifted, 'x');
    assert.equal(mercator.sources['basemap-GLOBAL_WEBMERCATOR'], undefined);
    assert.ok(
      mercator.notes.some((n) =>
        /matrix set "GLOBAL_WEBMERCATOR": an EPSG:3857 set that is not the Web Mercator quad tree/.test(n),
      ),
      mercator.notes.join('\n'),
    );
    const notXml = path.join(dir, 'page.xml');
    writeFileSync(notXml, '<html><body>maintenance</body></html>');
    const r = await cli(['sources', 'import', notXml]);
    assert.equal(r.code, 2);
    assert.match(r.err, /is neither a WMS nor a WMTS capabilities document \(its root is html\)/);
  });
});

describe(
  'sources from a WMS capabilities document (MapServer)',
  { skip: wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed' },
  () => {
    test('every named layer a wms source at the GetMap endpoint; a tile of one is drawn', async () => {
      const wms = await startWms();
      try {
        const capabilities = `${wms.url}?SERVICE=WMS&REQUEST=GetCapabilities&VERSION=1.3.0`;
        const reported = await cli(['sources', 'import', capabilities, '--json']);
        assert.equal(reported.code, 0, reported.err);
        // The GetMap URL the document reports (the fixture's mapfile names one without the port).
        assert.equal(
          (JSON.parse(reported.out) as { sources: Record<string, { url: string }> }).sources.quadrants!.url,
          'http://127.0.0.1/cgi-bin/mapserv?',
        );
        const r = await cli(['sources', 'import', capabilities, '--use-fetched-url']);
        assert.equal(r.code, 0, r.err);
        const file = path.join(dir, 'wms.yaml');
        writeFileSync(file, r.out);
        const quadrants = await loadSource(file, 'quadrants');
        assert.equal(quadrants.source.url, wms.url);
        assert.equal(quadrants.source.type, 'wms');
        assert.deepEqual(
          [
            quadrants.source.type === 'wms' && quadrants.source.layers,
            quadrants.source.type === 'wms' && quadrants.source.version,
          ],
          [['quadrants'], '1.3.0'],
        );
        assert.ok((await loadSource(file, 'roads-styled')).source);
        // The layer's tile over the fixture is an image.
        const res = await fetch(tileUrl(quadrants.source, { z: 14, x: 8192, y: 8191 }));
        assert.equal(res.headers.get('content-type'), 'image/png');
      } finally {
        await wms.stop();
      }
    });
  },
);

describe('reading the document', () => {
  test('a URL nothing answers names the host and why (connection refused), never its query', async () => {
    const port = await freePort();
    const r = await cli(['sources', 'import', `http://127.0.0.1:${port}/wms?SERVICE=WMS&token=hunter2`]);
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      new RegExp(
        `could not fetch http://127\\.0\\.0\\.1:${port}/wms: 127\\.0\\.0\\.1:${port} refused the connection \\(nothing listens there\\) \\(ECONNREFUSED\\)`,
      ),
    );
    assert.doesNotMatch(r.err, /hunter2|fetch failed/);
  });

  test('a body that never ends is cut off at 32 MiB, not read to the end first', { timeout: 60_000 }, async () => {
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    let sent = 0;
    const server = createServer((_req, res) => {
      // No content-length, and no end: only the cap stops the reader.
      res.writeHead(200, { 'content-type': 'text/xml' });
      const more = () => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
      };
      res.on('drain', more);
      more();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const r = await cli(['sources', 'import', `http://127.0.0.1:${port}/endless.xml`]);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, /endless\.xml sent over \d+ bytes, more than 33554432/);
    } finally {
      server.closeAllConnections();
      server.close();
    }
    assert.ok(sent < 256 * 1024 * 1024, `${sent} bytes sent`);
  });

  test('a local file is sized before it is read: over 32 MiB or not a regular file is refused', async () => {
    const big = path.join(dir, 'big.xml');
    writeFileSync(big, '');
    truncateSync(big, 33 * 1024 * 1024);
    const r = await cli(['sources', 'import', big]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /big\.xml" has 34603008 bytes, more than 33554432/);
    const folder = await cli(['sources', 'import', dir]);
    assert.equal(folder.code, 2, folder.err);
    assert.match(folder.err, /is not a regular file/);
  });
});
