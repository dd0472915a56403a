/**
 * Mirror chains on real MapServer layers: a source lists mirrors in its sources file; each mirror's contract
 * (the same grid, a decoded format, tiles that agree with the primary's) is judged when the mosaic is planned;
 * through an outage of the primary the usable mirror serves the tiles its breaker refuses, the manifest says
 * which tier served each tile and why each other mirror was refused, the mask shows the mirror's tiles, and a
 * re-drive puts the primary's tiles back once it is healthy.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { startMosaic, startRedrive } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { adminSignal } from '../../src/messages/breaker';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';
import { assertAccounted, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

// A real WMS needs Debian's cgi-mapserver, lighttpd and gdal-bin (.ci/run installs them).
const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';

interface MirrorManifest {
  tiers: Record<string, number>;
  mirrors: {
    name: string;
    usable: boolean;
    reason: string;
    agreement?: { tiles: number; meanAbsDiff: number; maxMeanAbsDiff: number; differingShare: number };
  }[];
  mask: { file: string; values: Record<string, number> };
  tiles: { status: string; tier?: string; reason: string; pass: number }[];
}

describe('a mirror chain on real MapServer layers', { skip }, () => {
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  let wms: Wms;
  let twin: { url: string; stop(): Promise<void> };
  let proxy: FaultProxy;
  const taskQueue = uniqueTaskQueue('mirror');
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-mirror-'));
  const sourcesFile = path.join(dir, 'sources.yaml');
  let result: MosaicResult;

  before(async () => {
    env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
    worker = await createWorker({
      connection: env.nativeConnection,
      client: env.client,
      namespace: 'default',
      taskQueue,
      roots: TEST_ROOTS,
    });
    running = worker.run();
    wms = await startWms();
    twin = await wms.startTwin();
    proxy = await startFaultProxy(wms.url);
    // The primary through a proxy that can fail; three mirrors on a second MapServer with the same mapfile:
    // the roads in red (another style), a geographic tile matrix set (another CRS), and the same layers.
    const layers = '[quadrants, roads-styled]';
    writeFileSync(
      sourcesFile,
      `sources:
  primary:
    type: wms
    url: ${proxy.url}
    layers: ${layers}
    transparent: false
    concurrency: 4
    mirrors: [red-roads, geographic, twin]
  red-roads:
    type: wms
    url: ${twin.url}
    layers: ${layers}
    styles: ['', red]
    transparent: false
  geographic:
    type: wmts-kvp
    url: ${twin.url}
    layer: quadrants
    tileMatrixSet: WorldCRS84Quad
  twin:
    type: wms
    url: ${twin.url}
    layers: ${layers}
    transparent: false
    concurrency: 4
`,
    );
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
    await proxy?.close();
    await twin?.stop();
    await wms?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('through an outage of the primary the identical mirror serves every refused tile; the others are refused, naming why', async (t) => {
    // The planner's 4 sample tiles and 8 tiles of the mosaic come from the primary; then it answers 503 for good.
    proxy.schedule({ mode: '503', afterRequests: 12 });
    const handle = await startMosaic(
      env.client,
      taskQueue,
      {
        sourcesFile,
        sourceName: 'primary',
        bbox: [100, 100, 1_900, 1_900],
        crs: 'EPSG:3857',
        zoom: 17,
        output: path.join(dir, 'mirrored.tif'),
        fallback: 'hole',
        batchSize: 8,
      },
      `mirror-${process.pid}`,
    );
    result = await handle.result();
    const m = readManifest(result) as unknown as MirrorManifest & Parameters<typeof assertAccounted>[0];
    assert.equal(assertAccounted(m), null);
    const sentDuringOutage = proxy.countBetween(proxy.faultStartedAt ?? Date.now());

    const byName = new Map(m.mirrors.map((x) => [x.name, x]));
    assert.deepEqual([...byName.keys()], ['red-roads', 'geographic', 'twin']);
    assert.equal(byName.get('red-roads')!.usable, false);
    assert.match(
      byName.get('red-roads')!.reason,
      /^mirror "red-roads" disagrees with "primary" on tile 17\/\d+\/\d+: mean abs diff [\d.]+ \(at most 3\)/,
    );
    assert.equal(byName.get('geographic')!.usable, false);
    assert.equal(
      byName.get('geographic')!.reason,
      'mirror "geographic": CRS EPSG:4326 (matrix set "WorldCRS84Quad") differs from the primary\'s EPSG:3857',
    );
    const twinPlan = byName.get('twin')!;
    assert.equal(twinPlan.usable, true, twinPlan.reason);
    assert.equal(twinPlan.agreement?.maxMeanAbsDiff, 0, 'the same mapfile on another server agrees exactly');

    t.diagnostic(
      `mirror chain: ${result.total} tiles, tiers ${JSON.stringify(m.tiers)}; ${sentDuringOutage} requests reached the failing primary; ` +
        `twin agreement ${JSON.stringify(twinPlan.agreement)}; red-roads: ${byName.get('red-roads')!.reason}`,
    );
    assert.equal(result.counts.ok, result.total, JSON.stringify(result.counts));
    assert.equal(m.tiers['mirror:twin']! + (m.tiers.primary ?? 0), result.total, JSON.stringify(m.tiers));
    assert.ok((m.tiers['mirror:twin'] ?? 0) > 0 && (m.tiers.primary ?? 0) > 0, JSON.stringify(m.tiers));
    assert.equal(m.tiers.hole, undefined, 'no holes');
    assert.ok(
      m.tiles.filter((x) => x.tier === 'mirror:twin').every((x) => /served by mirror "twin"/.test(x.reason)),
      m.tiles.find((x) => x.tier === 'mirror:twin')?.reason,
    );
    assert.ok(
      sentDuringOutage < m.tiers['mirror:twin']!,
      `the breaker kept the primary's outage requests (${sentDuringOutage}) below the tiles it failed`,
    );

    // The mask: one pixel per tile, the mirror's tiles in their own value.
    const { data } = await sharp(m.mask.file).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
    const values = new Set(data);
    assert.equal(m.mask.values.mirror, 208);
    assert.deepEqual(
      [...values].sort((a, b) => a - b),
      [208, 255],
    );
    assert.equal(data.filter((v) => v === 208).length, m.tiers['mirror:twin']);
  });

  test("a re-drive with replaceMirrors, once the primary is back, fetches the mirror's tiles from the primary", async () => {
    assert.ok(result, 'the mirrored mosaic ran');
    await proxy.set('pass');
    await env.client.workflow
      .getHandle(breakerWorkflowId(breakerKey(proxy.url)))
      .signal(adminSignal, { action: 'reset', reason: 'test' });
    const before = proxy.log.length;
    const mirrored = readManifest(result) as unknown as MirrorManifest;
    const id = await startRedrive(env.client, taskQueue, result.manifest, `mirror-redrive-${process.pid}`, undefined, {
      replaceMirrors: true,
    });
    const r2 = (await env.client.workflow.getHandle(id).result()) as MosaicResult;
    const m2 = readManifest(r2) as unknown as MirrorManifest & Parameters<typeof assertAccounted>[0];
    assert.equal(assertAccounted(m2), null);
    assert.deepEqual(m2.tiers, { primary: result.total });
    // Only the mirror's tiles were fetched again (one request each, perhaps one more as the breaker closes).
    // The entity's self-probes of the primary, due about then (the breaker was open until the reset), are no
    // tiles of the re-drive, and not counted (43 requests for 41 tiles failed one CI run; cause not traced).
    const sent = proxy.log.slice(before).filter((r) => !r.selfProbe).length;
    assert.ok(
      sent >= mirrored.tiers['mirror:twin']! && sent <= mirrored.tiers['mirror:twin']! + 1,
      `${sent} requests for ${mirrored.tiers['mirror:twin']} mirror tiles`,
    );
  });
});
