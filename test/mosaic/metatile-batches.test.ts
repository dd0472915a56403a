import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { resolution } from '../../src/geo/mercator';
import { metatileBatches, metatileBlocks } from '../../src/messages/metatile-batches';
import {
  selectionIndices,
  type MosaicRequest,
  type TileGrid,
  type TileSelection,
} from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { startFaultProxy } from '../helpers/fault-proxy';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';
import { assertAccounted, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

const grid = (xMin: number, yMin: number, cols: number, rows: number): TileGrid => ({
  z: 10,
  xMin,
  xMax: xMin + cols - 1,
  yMin,
  yMax: yMin + rows - 1,
  tileSize: 256,
});
/** The metatiles (aligned to 0/0) each batch touches. */
const metatilesOf = (g: TileGrid, b: TileSelection, [mc, mr]: [number, number]) => {
  const n = g.xMax - g.xMin + 1;
  return new Set(
    selectionIndices(b).map(
      (i) => `${Math.floor((g.yMin + Math.floor(i / n)) / mr)}/${Math.floor((g.xMin + (i % n)) / mc)}`,
    ),
  );
};

describe('batches and blocks of whole metatiles', () => {
  test('an aligned 12 x 8 area in 4 x 4 metatiles, batches of 16: one batch per metatile, 6 in all', () => {
    const g = grid(8, 4, 12, 8);
    const batches = metatileBatches(g, { start: 0, count: 96 }, [4, 4], 16);
    assert.equal(batches.length, 6);
    for (const b of batches) assert.equal(metatilesOf(g, b, [4, 4]).size, 1);
  });

  test('any grid, selection and sizes: every tile once, no batch over its size, and a metatile that fits a batch is in one batch', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 64 }),
        fc.boolean(),
        (x0, y0, c, r, mc, mr, size, sparse) => {
          const g = grid(x0, y0, c, r);
          const all = Array.from({ length: c * r }, (_, i) => i);
          const sel: TileSelection = sparse ? { indices: all.filter((i) => i % 3 !== 1) } : { start: 0, count: c * r };
          const batches = metatileBatches(g, sel, [mc, mr], size);
          const seen = batches.flatMap(selectionIndices).sort((a, b) => a - b);
          assert.deepEqual(seen, selectionIndices(sel));
          assert.ok(batches.every((b) => selectionIndices(b).length <= size && selectionIndices(b).length > 0));
          if (mc * mr <= size) {
            const where = new Map<string, number>();
            batches.forEach((b, k) => {
              for (const m of metatilesOf(g, b, [mc, mr])) {
                assert.ok(
                  !where.has(m) || where.get(m) === k,
                  `metatile ${m} split between batches ${where.get(m)} and ${k}`,
                );
                where.set(m, k);
              }
            });
          }
          const blocks = metatileBlocks(g, sel, mr, Math.max(size, mc * mr * 2));
          assert.deepEqual(blocks.flatMap(selectionIndices), selectionIndices(sel));
          if (!sparse)
            assert.ok(
              blocks.every((b) => 'start' in b),
              'a range stays a range',
            );
        },
      ),
      { numRuns: 300 },
    );
  });
});

const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';

describe('a metatiled WMS mosaic asks a real MapServer for the minimum number of GetMaps', { skip }, () => {
  // 8 x 8 tiles at zoom 17 lying on the 4 x 4 metatile grid: 4 metatiles, so 4 GetMaps at the least.
  const Z = 17;
  const SIDE = 8 * 256 * resolution(Z);
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  let wms: Wms;
  const taskQueue = uniqueTaskQueue('metatiles');
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-metatiles-'));

  before(async () => {
    wms = await startWms({ extent: [0, 0, SIDE, SIDE] });
    env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
    worker = await createWorker({
      connection: env.nativeConnection,
      client: env.client,
      namespace: 'default',
      taskQueue,
      roots: TEST_ROOTS,
    });
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
    await wms?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('batchSize 8 (before: batches of one row of the area each, 16 GetMaps) is rounded up to whole metatiles: 4 GetMaps, every tile ok', async () => {
    const proxy = await startFaultProxy(wms.url);
    try {
      const request: MosaicRequest = {
        source: {
          type: 'wms',
          url: proxy.url,
          version: '1.3.0',
          layers: ['quadrants'],
          transparent: false,
          metatile: { size: [4, 4], buffer: 0 },
          concurrency: 2,
        },
        sourceName: 'fixture',
        crs: 'EPSG:3857',
        bbox: [1, 1, SIDE - 1, SIDE - 1],
        zoom: Z,
        output: path.join(dir, 'meta.tif'),
        batchSize: 8,
        parallelBatches: 2,
      };
      const result = await (await startMosaic(env.client, taskQueue, request, `metatiles-${process.pid}`)).result();
      assert.equal(result.counts.ok, 64, JSON.stringify(result.counts));
      assert.equal(assertAccounted(readManifest(result)), null);
      assert.equal(proxy.log.length, 4, `GetMaps: ${proxy.log.length}`);
    } finally {
      await proxy.close();
    }
  });
});
