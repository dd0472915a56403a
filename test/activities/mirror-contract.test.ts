import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test, type TestContext } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import {
  DEFAULT_TOLERANCE,
  gridMismatch,
  measureAgreement,
  type Agreement,
  type NamedSource,
} from '../../src/activities/mirror/contract';
import { judgeMirrors } from '../../src/activities/mirror/judge';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { tileBounds } from '../../src/geo/mercator';
import { tileUrl, type TileAddress } from '../../src/sources/request-url';
import { parseSource, type SourceInput } from '../../src/sources/schema';
import { freePort, startWms, wmsAvailable, type Wms } from '../helpers/mapserver';

const xyz = (more: Partial<SourceInput> = {}) =>
  parseSource({ type: 'xyz', url: 'https://a.example/{z}/{x}/{y}.png', ...more });

describe('gridMismatch: the grid and format a mirror must share with its primary', () => {
  test('XYZ, TMS, WMS in EPSG:3857 or EPSG:900913 and GoogleMapsCompatible WMTS draw one grid', () => {
    const primary = xyz();
    const same = [
      xyz({ url: 'https://b.example/{z}/{x}/{y}.png' }),
      // The URL builder flips TMS rows: the same tiles, counted from the bottom.
      parseSource({ type: 'tms', url: 'https://b.example/tms/{z}/{x}/{y}.png' }),
      parseSource({ type: 'wms', url: 'https://b.example/wms', layers: ['osm'] }),
      parseSource({ type: 'wms', url: 'https://b.example/wms', layers: ['osm'], version: '1.1.1', crs: 'EPSG:900913' }),
      parseSource({ type: 'wmts-rest', url: 'https://b.example/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}.png' }),
      parseSource({
        type: 'wmts-kvp',
        url: 'https://b.example/gwc/service/wmts',
        layer: 'osm',
        tileMatrixSet: 'EPSG:3857',
        tileMatrixPrefix: 'EPSG:3857:',
      }),
      parseSource({ type: 'wmts-kvp', url: 'https://b.example/wmts', layer: 'osm', tileMatrixSet: 'WebMercatorQuad' }),
    ];
    for (const m of same) assert.equal(gridMismatch(primary, m, 'b'), null, m.type);
  });

  test('another CRS, an unknown matrix set, another tile size or an undecoded format is refused, naming the difference', () => {
    const primary = xyz();
    const geographic = parseSource({
      type: 'wmts-kvp',
      url: 'https://b.example/wmts',
      layer: 'osm',
      tileMatrixSet: 'WorldCRS84Quad',
    });
    assert.equal(
      gridMismatch(primary, geographic, 'osm-b'),
      'mirror "osm-b": CRS EPSG:4326 (matrix set "WorldCRS84Quad") differs from the primary\'s EPSG:3857',
    );
    assert.equal(
      gridMismatch(geographic, primary),
      'mirror: CRS EPSG:3857 differs from the primary\'s EPSG:4326 (matrix set "WorldCRS84Quad")',
    );
    const custom = parseSource({
      type: 'wmts-rest',
      url: 'https://b.example/{TileMatrix}/{TileRow}/{TileCol}.png',
      tileMatrixSet: 'alps25',
    });
    assert.match(
      gridMismatch(primary, custom, 'b') ?? '',
      /^mirror "b": CRS unknown \(matrix set "alps25"\) cannot be shown to match the primary's EPSG:3857$/,
    );
    // The same set on both sides is the one case an unknown grid can match.
    assert.equal(
      gridMismatch(
        custom,
        parseSource({ type: 'wmts-kvp', url: 'https://c.example/wmts', layer: 'x', tileMatrixSet: 'alps25' }),
      ),
      null,
    );
    assert.equal(
      gridMismatch(primary, xyz({ tileSize: 512 }), 'b'),
      'mirror "b": tile size 512 differs from the primary\'s 256',
    );
    assert.equal(
      gridMismatch(primary, xyz({ format: 'image/gif' }), 'b'),
      'mirror "b": format image/gif is not one the pipeline decodes (image/png, image/jpeg, image/webp)',
    );
    assert.match(
      gridMismatch(xyz({ format: 'image/tiff' }), xyz({ format: 'image/tiff' })) ?? '',
      /the primary's format image\/tiff is not one the pipeline decodes/,
    );
  });

  test("a mirror on the primary's scheme, host and port shares its breaker: refused unless a partition separates them", async () => {
    const primary = xyz({ url: 'https://a.example/osm/{z}/{x}/{y}.png' });
    const grid = { z: 3, xMin: 0, xMax: 1, yMin: 0, yMax: 1, tileSize: 256 };
    const plan = { sourceName: 'osm', source: primary, grid, storeRoot: '/nonexistent/store' };
    const [same] = await judgeMirrors(plan, [
      { name: 'osm-copy', source: xyz({ url: 'https://a.example/copy/{z}/{x}/{y}.png' }) },
    ]);
    assert.equal(same!.usable, false);
    assert.equal(
      same!.reason,
      'mirror "osm-copy": shares the primary\'s breaker https://a.example:443 (the same scheme, host and port); give one of them a breakerPartition, or use another host',
    );
    assert.equal(same!.agreement, undefined, 'refused before any fetch');
  });

  test('two mirrors judged for one plan ask the primary for each sample tile once, and agree with it', async () => {
    const primaryServed: string[] = [];
    const primaryServer = await startDemoTileServer({ onServed: (p) => primaryServed.push(p) });
    const mirrorServer = await startDemoTileServer();
    const otherMirror = await startDemoTileServer();
    const store = mkdtempSync(path.join(tmpdir(), 'tilebreaker-mirror-store-'));
    try {
      const plan = {
        sourceName: 'demo',
        source: xyz({ url: primaryServer.template }),
        grid: { z: 10, xMin: 530, xMax: 537, yMin: 355, yMax: 362, tileSize: 256 },
        storeRoot: store,
      };
      const judged = await judgeMirrors(plan, [
        { name: 'copy-a', source: xyz({ url: mirrorServer.template }) },
        { name: 'copy-b', source: xyz({ url: otherMirror.template }) },
      ]);
      assert.deepEqual(
        judged.map((m) => [m.name, m.usable, m.agreement?.tiles]),
        [
          ['copy-a', true, 4],
          ['copy-b', true, 4],
        ],
      );
      assert.equal(primaryServed.length, 4, `the primary served ${primaryServed.join(', ')}`);
      assert.equal(new Set(primaryServed).size, 4);
    } finally {
      await primaryServer.close();
      await mirrorServer.close();
      await otherMirror.close();
      rmSync(store, { recursive: true, force: true });
    }
  });

  test('PNG, JPEG and WebP are compatible with each other', () => {
    for (const a of ['image/png', 'image/jpeg', 'image/webp']) {
      for (const b of ['image/png', 'image/jpeg', 'image/webp'])
        assert.equal(gridMismatch(xyz({ format: a }), xyz({ format: b })), null, `${a} / ${b}`);
    }
  });
});

// A real WMS needs Debian's cgi-mapserver, lighttpd and gdal-bin (.ci/run installs them).
const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';

// The fixture raster lies on 2 x 2 tiles of zoom 16 at 1:1 (512 px), so zoom 17 is an exact 2x and nearest
// neighbour rendering has no ties: any two renders of the same style agree pixel for pixel.
const Z16: TileAddress[] = [
  { z: 16, x: 32768, y: 32766 },
  { z: 16, x: 32769, y: 32766 },
  { z: 16, x: 32768, y: 32767 },
  { z: 16, x: 32769, y: 32767 },
];
// Zoom 17 tiles along the diagonal road, and one beside it.
const Z17: TileAddress[] = [
  { z: 17, x: 65536, y: 65535 },
  { z: 17, x: 65537, y: 65534 },
  { z: 17, x: 65538, y: 65533 },
  { z: 17, x: 65537, y: 65535 },
];
const SAMPLE = [...Z16, ...Z17];
const nw = tileBounds(16, 32768, 32766);
const se = tileBounds(16, 32769, 32767);

function report(t: TestContext, label: string, a: Agreement): void {
  const f = (n: number) => n.toFixed(3);
  t.diagnostic(
    `${label}: tiles ${a.tiles}, meanAbsDiff ${f(a.meanAbsDiff)} (max ${f(a.maxMeanAbsDiff)}), differingShare ${(a.differingShare * 100).toFixed(3)}% ` +
      `(max ${(a.maxDifferingShare * 100).toFixed(3)}%), agrees ${a.agrees}${a.reason ? `; ${a.reason}` : ''}`,
  );
}

describe('measureAgreement against a real WMS: MapServer 8 behind lighttpd', { skip }, () => {
  let wms: Wms;
  let twin: { url: string; stop(): Promise<void> };
  const pools = new EndpointPools();
  const wmsNamed = (name: string, more: Partial<SourceInput> = {}): NamedSource => ({
    name,
    source: parseSource({
      type: 'wms',
      url: wms.url,
      layers: ['quadrants', 'roads-styled'],
      transparent: false,
      ...more,
    }),
  });
  let primary: NamedSource;
  // A mirror that fetches the primary's tile and re-encodes it (a transcoding cache or CDN), or cuts it short.
  let transcoder: string;
  const server: Server = createServer((req, res) => {
    const m = /^\/(webp|jpeg|truncated)\/(\d+)\/(\d+)\/(\d+)$/.exec(req.url ?? '');
    if (!m) return void res.writeHead(404).end();
    fetch(tileUrl(primary.source, { z: Number(m[2]), x: Number(m[3]), y: Number(m[4]) }))
      .then(async (r) => {
        const png = Buffer.from(await r.arrayBuffer());
        const body =
          m[1] === 'webp'
            ? await sharp(png).webp().toBuffer()
            : m[1] === 'jpeg'
              ? await sharp(png).jpeg({ quality: 90 }).toBuffer()
              : png.subarray(0, png.length >> 1);
        res.writeHead(200, { 'content-type': m[1] === 'truncated' ? 'image/png' : `image/${m[1]}` }).end(body);
      })
      .catch(() => res.writeHead(502).end());
  });

  before(async () => {
    wms = await startWms({ extent: [nw.minX, se.minY, se.maxX, nw.maxY] });
    twin = await wms.startTwin();
    primary = wmsNamed('fixture');
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    transcoder = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => server.close(r));
    await pools.close();
    await twin?.stop();
    await wms?.stop();
  });

  test('a second source on the same layer agrees exactly', async (t) => {
    const a = await measureAgreement(primary, wmsNamed('fixture-again'), SAMPLE, { pools });
    report(t, 'same layer, same server', a);
    assert.equal(a.agrees, true, a.reason);
    assert.equal(a.tiles, SAMPLE.length);
    assert.equal(a.maxMeanAbsDiff, 0);
    assert.equal(a.differingShare, 0);
  });

  test('a second MapServer serving the same mapfile agrees exactly', async (t) => {
    const a = await measureAgreement(primary, wmsNamed('fixture-twin', { url: twin.url }), SAMPLE, { pools });
    report(t, 'second server, same mapfile', a);
    assert.equal(a.agrees, true, a.reason);
    assert.equal(a.maxMeanAbsDiff, 0);
  });

  test("an XYZ mirror (MapServer's own tile mode) of the WMS primary agrees", async (t) => {
    const url = `${twin.url}?mode=tile&tilemode=gmap&tile={x}+{y}+{z}&layers=quadrants+roads-styled`;
    const a = await measureAgreement(
      primary,
      { name: 'fixture-xyz', source: parseSource({ type: 'xyz', url }) },
      SAMPLE,
      { pools },
    );
    report(t, 'XYZ tile mode mirror', a);
    assert.equal(a.agrees, true, a.reason);
  });

  test('the same render as JPEG agrees within the tolerance (pixel by pixel it would not)', async (t) => {
    const jpeg = wmsNamed('fixture-jpeg', { url: twin.url, format: 'image/jpeg' });
    const a = await measureAgreement(primary, jpeg, SAMPLE, { pools });
    report(t, 'JPEG (MapServer, quality 75) mirror of a PNG primary', a);
    assert.equal(a.agrees, true, a.reason);
    assert.ok(a.maxMeanAbsDiff > 0, 'JPEG is lossy: some difference is measured');
    // Chroma subsampling moves whole pixels at the fixture's hard colour edges: compared pixel by pixel, JPEG
    // differs on more pixels than the restyled roads below do.
    const pixels = await measureAgreement(primary, jpeg, SAMPLE, { pools, tolerance: { blockSize: 1, threshold: 16 } });
    report(t, 'the same, pixel by pixel (blockSize 1, threshold 16)', pixels);
    assert.equal(pixels.agrees, false);
    assert.match(pixels.reason ?? '', /% of pixels differ by more than 16/);
  });

  test('the same render re-encoded as WebP or JPEG quality 90 by a transcoding mirror agrees', async (t) => {
    for (const format of ['webp', 'jpeg'] as const) {
      const mirror = {
        name: `fixture-${format}`,
        source: parseSource({ type: 'xyz', url: `${transcoder}/${format}/{z}/{x}/{y}`, format: `image/${format}` }),
      };
      const a = await measureAgreement(primary, mirror, SAMPLE, { pools });
      report(t, format === 'webp' ? 'WebP (sharp, quality 80)' : 'JPEG (sharp, quality 90)', a);
      assert.equal(a.agrees, true, a.reason);
    }
  });

  test('the same layers in another style disagree, naming the tile and the figures', async (t) => {
    const red = wmsNamed('fixture-red', { url: twin.url, styles: ['', 'red'] });
    const a = await measureAgreement(primary, red, SAMPLE, { pools });
    report(t, 'another style (red roads)', a);
    assert.equal(a.agrees, false);
    assert.match(
      a.reason ?? '',
      /^mirror "fixture-red" disagrees with "fixture" on tile \d+\/\d+\/\d+: mean abs diff [\d.]+ \(at most 3\), [\d.]+% of 4x4 blocks differ by more than 32 \(at most 1\.0%\)$/,
    );
    assert.ok(
      a.maxMeanAbsDiff > DEFAULT_TOLERANCE.meanAbsDiff && a.maxDifferingShare > DEFAULT_TOLERANCE.differingShare,
      'both figures are out of bounds',
    );
    report(
      t,
      'the same, pixel by pixel (blockSize 1, threshold 16)',
      await measureAgreement(primary, red, SAMPLE, { pools, tolerance: { blockSize: 1, threshold: 16 } }),
    );
  });

  test('a mirror that leaves out a layer disagrees', async (t) => {
    const a = await measureAgreement(
      primary,
      wmsNamed('fixture-noroads', { url: twin.url, layers: ['quadrants'] }),
      SAMPLE,
      { pools },
    );
    report(t, 'a layer left out (no roads)', a);
    assert.equal(a.agrees, false);
    assert.match(a.reason ?? '', /disagrees/);
  });

  test('a mirror in another CRS is refused by its grid, before any fetch', async (t) => {
    const geographic: NamedSource = {
      name: 'fixture-4326',
      source: parseSource({ type: 'wmts-kvp', url: twin.url, layer: 'quadrants', tileMatrixSet: 'WorldCRS84Quad' }),
    };
    const a = await measureAgreement(primary, geographic, SAMPLE, { pools });
    report(t, 'another CRS', a);
    assert.equal(a.agrees, false);
    assert.equal(a.tiles, 0);
    assert.equal(
      a.reason,
      'mirror "fixture-4326": CRS EPSG:4326 (matrix set "WorldCRS84Quad") differs from the primary\'s EPSG:3857',
    );
  });

  test('a mirror that fails or answers with an exception makes the measurement inconclusive, never a pass', async (t) => {
    const port = await freePort();
    const down = await measureAgreement(
      primary,
      wmsNamed('fixture-down', { url: `http://127.0.0.1:${port}/cgi-bin/mapserv` }),
      SAMPLE,
      { pools },
    );
    report(t, 'mirror down', down);
    assert.equal(down.agrees, false);
    assert.equal(
      down.reason,
      `inconclusive: mirror "fixture-down": tile ${SAMPLE[0]!.z}/${SAMPLE[0]!.x}/${SAMPLE[0]!.y}: no tile: ECONNREFUSED`,
    );
    const missing = await measureAgreement(
      primary,
      wmsNamed('fixture-nolayer', { layers: ['no_such_layer'] }),
      SAMPLE,
      { pools },
    );
    assert.equal(missing.agrees, false);
    assert.match(
      missing.reason ?? '',
      /^inconclusive: mirror "fixture-nolayer": tile 16\/32768\/32766: permanent: ServiceException: LayerNotDefined/,
    );
    const truncated = await measureAgreement(
      primary,
      { name: 'fixture-cut', source: parseSource({ type: 'xyz', url: `${transcoder}/truncated/{z}/{x}/{y}` }) },
      SAMPLE,
      { pools },
    );
    report(t, 'mirror tile cut short', truncated);
    assert.equal(truncated.agrees, false);
    assert.match(
      truncated.reason ?? '',
      /^inconclusive: mirror "fixture-cut": tile 16\/32768\/32766: service-exception: /,
    );
    const primaryDown = await measureAgreement(
      wmsNamed('fixture-down', { url: `http://127.0.0.1:${port}/cgi-bin/mapserv` }),
      primary,
      SAMPLE,
      { pools },
    );
    assert.match(primaryDown.reason ?? '', /^inconclusive: primary "fixture-down"/);
    const none = await measureAgreement(primary, wmsNamed('fixture-again'), [], { pools });
    assert.deepEqual([none.agrees, none.reason], [false, 'inconclusive: no sample tiles']);
  });
});
