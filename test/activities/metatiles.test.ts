import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { assembleMosaic } from '../../src/activities/mosaic/assemble';
import { makeMosaicBatch } from '../../src/activities/mosaic/batch';
import { planMosaic } from '../../src/activities/mosaic/plan';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { requestUnits } from '../../src/activities/fetch/metatiles';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { parseSource } from '../../src/sources/schema';
import { tileBounds } from '../../src/geo/mercator';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';
import { startTestEndpoint, type TestEndpoint } from '../helpers/tile-server';

const wmsAt = (url: string, extra: Record<string, unknown> = {}) =>
  parseSource({ type: 'wms', url, layers: ['quadrants'], transparent: false, ...extra });
const grid = (z: number, x0: number, x1: number, y0: number, y1: number) => {
  const out = [];
  for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) out.push({ z, x, y });
  return out;
};

test('metatiles: one request per aligned metatile, covering only the planned tiles in it, buffer clamped at the world edge', () => {
  const source = wmsAt('http://127.0.0.1:9/wms', { metatile: { size: [4, 4], buffer: 32 } });
  // Columns 5..9, rows 2..3: metatile columns 4..7 and 8..11, so two requests: 3 x 2 and 2 x 2 tiles.
  const units = requestUnits(source, grid(10, 5, 9, 2, 3));
  assert.equal(units.length, 2);
  assert.deepEqual(
    units.map((u) => u.members.length),
    [6, 4],
  );
  assert.deepEqual([units[0]!.width, units[0]!.height], [3 * 256 + 64, 2 * 256 + 64]);
  assert.deepEqual(units[0]!.meta!.cells, [
    [0, 0],
    [1, 0],
    [2, 0],
    [0, 1],
    [1, 1],
    [2, 1],
  ]);
  // At the world's top-left corner there is nothing to buffer on those sides.
  const corner = requestUnits(source, grid(2, 0, 1, 0, 1));
  assert.equal(corner.length, 1);
  assert.deepEqual(
    [corner[0]!.meta!.left, corner[0]!.meta!.top, corner[0]!.width, corner[0]!.height],
    [0, 0, 2 * 256 + 32, 2 * 256 + 32],
  );
  // Without metatile: one request per tile.
  assert.equal(requestUnits(wmsAt('http://127.0.0.1:9/wms'), grid(10, 5, 9, 2, 3)).length, 10);
});

test('a metatile larger than the server allows is refused, naming the field and the sizes', () => {
  assert.throws(
    () => wmsAt('http://127.0.0.1:9/wms', { metatile: { size: [16, 16], buffer: 1 } }),
    /metatile: makes 4098x4098 px GetMaps, larger than maxRequestSize 4096/,
  );
  assert.throws(
    () => wmsAt('http://127.0.0.1:9/wms', { metatile: { size: [8, 8], buffer: 64 }, maxRequestSize: 2048 }),
    /metatile: makes 2176x2176 px GetMaps, larger than maxRequestSize 2048/,
  );
});

describe('metatiles against a failing endpoint', () => {
  let endpoint: TestEndpoint;
  const pools = new EndpointPools();
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-meta-fail-'));
  before(async () => {
    endpoint = await startTestEndpoint(503);
  });
  after(async () => {
    await endpoint.close();
    await pools.close();
    rmSync(dir, { recursive: true, force: true });
  });
  test('a failed metatile fails each of its tiles with the same reason, after one request per attempt', async () => {
    const source = wmsAt(`${endpoint.url}/wms`, { metatile: { size: [4, 4], buffer: 0 } });
    const results = await makeFetchBatch({ pools })({
      sourceName: 'm',
      source,
      tiles: grid(10, 0, 3, 0, 3),
      storeRoot: dir,
      breaker: false,
      retry: { attempts: 2, baseMs: 1, capMs: 5 },
    });
    assert.equal(results.length, 16);
    assert.equal(endpoint.requests, 2, 'one GetMap per attempt for 16 tiles');
    assert.ok(
      results.every(
        (r) => r.status === 'failed' && r.kind === 'transient' && r.attempts === 2 && r.reason === results[0]!.reason,
      ),
    );
  });
});

const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';
describe('metatiles from a real WMS (MapServer 8)', { skip }, () => {
  let wms: Wms;
  const pools = new EndpointPools();
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-meta-'));
  // The raster over 8 x 8 tiles at zoom 17 (four output pixels per raster pixel, on the tile grid): a server
  // that renders without edge effects, so tiles must match whatever request they were cut from.
  const nw = tileBounds(17, 65536, 65528);
  const se = tileBounds(17, 65543, 65535);
  before(async () => {
    wms = await startWms({ extent: [nw.minX, se.minY, se.maxX, nw.maxY] });
  });
  after(async () => {
    await wms?.stop();
    await pools.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a mosaic fetched in direct chunks (no tile cache) stitches to the same pixels as one from cut tiles', async () => {
    const nwT = tileBounds(17, 65537, 65529);
    const seT = tileBounds(17, 65542, 65534);
    const build = async (name: string, extra: Partial<MosaicRequest>) => {
      const plan = await planMosaic({
        source: {
          type: 'wms',
          url: wms.url,
          layers: ['quadrants'],
          transparent: false,
          concurrency: 4,
          metatile: { size: [4, 4], buffer: 0 },
        },
        sourceName: 'meta',
        bbox: [nwT.minX, seT.minY, seT.maxX, nwT.maxY],
        crs: 'EPSG:3857',
        zoom: 17,
        output: path.join(dir, name, 'mosaic.tif'),
        ...extra,
      });
      const summary = await makeMosaicBatch({ pools })({
        plan,
        tiles: { start: 0, count: plan.total },
        pass: 0,
        batchId: 'p0-b0-0',
        whenRefused: 'defer',
        final: true,
      });
      assert.equal(summary.counts.ok, 36);
      return { plan, result: await assembleMosaic({ plan, partial: false }), requests: summary.requests };
    };
    const cut = await build('cut', { breaker: false });
    const direct = await build('direct', { breaker: false, directChunks: true });
    assert.deepEqual(
      direct.plan.source.type === 'wms' && direct.plan.source.metatile?.size,
      [8, 8],
      'chunks of 2048 px',
    );
    // No tile cache: the tiles point into their chunk.
    const m = JSON.parse(readFileSync(direct.result.manifest, 'utf8')) as {
      tiles: { path: string; region?: unknown }[];
    };
    assert.ok(m.tiles.every((t) => t.region && /chunks/.test(t.path)));
    const a = await sharp(cut.result.output).raw().toBuffer();
    const b = await sharp(direct.result.output).raw().toBuffer();
    assert.ok(a.equals(b), 'identical mosaics');
  });

  for (const buffer of [0, 32]) {
    test(`tiles cut from 4x4 metatiles (buffer ${buffer} px) are pixel-identical to tiles fetched one by one`, async () => {
      // 6 x 6 tiles inside the raster with a tile to spare all round (the buffer stays over the raster: its
      // edge inside a request is an edge effect of its own), crossing metatile boundaries both ways.
      const tiles = grid(17, 65537, 65542, 65529, 65534);
      const fetchTiles = makeFetchBatch({ pools });
      const single = await fetchTiles({
        sourceName: `single${buffer}`,
        source: wmsAt(wms.url, { concurrency: 4 }),
        tiles,
        storeRoot: dir,
        breaker: false,
      });
      const meta = await fetchTiles({
        sourceName: `meta${buffer}`,
        source: wmsAt(wms.url, { concurrency: 4, metatile: { size: [4, 4], buffer } }),
        tiles,
        storeRoot: dir,
        breaker: false,
      });
      assert.ok(
        single.every((r) => r.status === 'ok'),
        single.find((r) => r.status !== 'ok')?.reason,
      );
      assert.ok(
        meta.every((r) => r.status === 'ok'),
        meta.find((r) => r.status !== 'ok')?.reason,
      );
      assert.match(meta[0]!.reason, /cut into \d+ tiles/);
      let differing = 0;
      for (let k = 0; k < tiles.length; k++) {
        const a = await sharp(readFileSync(single[k]!.path!)).removeAlpha().raw().toBuffer();
        const b = await sharp(readFileSync(meta[k]!.path!)).removeAlpha().raw().toBuffer();
        if (!a.equals(b)) {
          differing++;
          if (process.env.TILEBREAKER_DEBUG_META) console.log(k, single[k]!.path, meta[k]!.path, diff(a, b));
        }
      }
      assert.equal(differing, 0, `${differing} of ${tiles.length} tiles differ`);
    });
  }
});

function diff(a: Buffer, b: Buffer): string {
  let n = 0;
  let max = 0;
  let first = -1;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (d) {
      n++;
      max = Math.max(max, d);
      if (first < 0) first = i;
    }
  }
  return `${n} bytes differ, max ${max}, first at pixel ${Math.floor(first / 3) % 256},${Math.floor(first / 3 / 256)}`;
}
