import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { breakerKey, breakerWorkflowId, type TransitionRecord } from '../../src/breaker';
import { exitCodeFor, startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { transitionsQuery } from '../../src/messages/breaker';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';
import { assertAccounted, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

// A real WMS needs Debian's cgi-mapserver, lighttpd and gdal-bin (.ci/run installs them).
const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';

/**
 * A proxy in front of MapServer that counts what reaches it, by LAYERS, with the time of each request; one
 * host:port, so every source through it shares one breaker. `onRequest` runs before a request is forwarded.
 */
interface CountingProxy {
  url: string;
  log: { at: number; layers: string }[];
  count(layers: string, from?: number, to?: number): number;
  onRequest: (layers: string, nth: number) => void;
  close(): Promise<void>;
}

async function countingProxy(wms: Wms): Promise<CountingProxy> {
  const target = new URL(wms.url);
  const proxy: CountingProxy = {
    url: '',
    log: [],
    count: (layers, from = 0, to = Infinity) =>
      proxy.log.filter((r) => r.layers === layers && r.at >= from && r.at <= to).length,
    onRequest: () => undefined,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', target);
    const layers = [...u.searchParams].find(([k]) => k.toLowerCase() === 'layers')?.[1] ?? '';
    proxy.log.push({ at: Date.now(), layers });
    proxy.onRequest(layers, proxy.count(layers));
    fetch(new URL(u.pathname + u.search, target))
      .then(async (r) => {
        const body = Buffer.from(await r.arrayBuffer());
        res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/octet-stream' });
        res.end(body);
      })
      .catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${target.pathname}`;
  return proxy;
}

describe('configuration errors and a vanishing layer on a real MapServer', { skip }, () => {
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  const taskQueue = uniqueTaskQueue('config-error');
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-config-error-'));
  const cleanup: (() => Promise<void>)[] = [];

  before(async () => {
    env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
    // The default breaker policy: what a fleet runs.
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
    for (const c of cleanup) await c();
    rmSync(dir, { recursive: true, force: true });
  });

  async function server(): Promise<{ wms: Wms; proxy: CountingProxy }> {
    const wms = await startWms();
    const proxy = await countingProxy(wms);
    cleanup.push(
      () => proxy.close(),
      () => wms.stop(),
    );
    return { wms, proxy };
  }

  /** 13 x 13 = 169 tiles at zoom 18 over the fixture's raster. */
  function request(
    proxy: CountingProxy,
    name: string,
    layers: string[],
    extra: Partial<MosaicRequest> = {},
  ): MosaicRequest {
    return {
      source: {
        type: 'wms',
        url: proxy.url,
        layers,
        transparent: false,
        concurrency: 4,
        timeouts: { connectMs: 1_000, headersMs: 5_000, bodyMs: 5_000, totalMs: 10_000 },
      },
      sourceName: name,
      bbox: [100, 100, 1_900, 1_900],
      crs: 'EPSG:3857',
      zoom: 18,
      output: path.join(dir, `${name}.tif`),
      batchSize: 16,
      parallelBatches: 2,
      fallback: 'fail-fast',
      ...extra,
    };
  }

  async function run(req: MosaicRequest, id: string): Promise<MosaicResult> {
    const handle = await startMosaic(env.client, taskQueue, req, `${id}-${process.pid}`);
    return handle.result();
  }

  async function transitions(proxy: CountingProxy): Promise<TransitionRecord[]> {
    return env.client.workflow
      .getHandle(breakerWorkflowId(breakerKey(proxy.url)))
      .query(transitionsQuery)
      .catch(() => []);
  }

  test('a wrong layer beside a good one on the same host: the wrong one fails as a configuration error after a few requests (exit 4); the good one is whole and the breaker never opens', async () => {
    const { proxy } = await server();
    // An image published earlier at the wrong layer's output: a run that meets a configuration error leaves it.
    const earlier = Buffer.from('an earlier image');
    writeFileSync(path.join(dir, 'wrong-layer.tif'), earlier);
    const started = Date.now();
    const [bad, good] = await Promise.all([
      run(request(proxy, 'wrong-layer', ['quadrantz']), 'wrong-layer'),
      run(request(proxy, 'good-layer', ['quadrants']), 'good-layer'),
    ]);
    const badRequests = proxy.count('quadrantz');
    const goodRequests = proxy.count('quadrants');
    console.log(
      `wrong layer: ${badRequests} requests for ${bad.total} tiles; good layer: ${goodRequests} requests, ${good.counts.ok} ok; ${Date.now() - started} ms`,
    );

    const m = readManifest(bad);
    assert.equal(assertAccounted(m), null);
    assert.equal(m.counts.failed, bad.total, JSON.stringify(m.counts));
    assert.ok(
      m.tiles.every(
        (t) =>
          t.configError === true && /^configuration error: LayerNotDefined for source "wrong-layer"/.test(t.reason),
      ),
      m.tiles[0]!.reason,
    );
    assert.match(bad.configError ?? '', /^configuration error: LayerNotDefined for source "wrong-layer"/);
    assert.equal((m as unknown as { configError: string }).configError, bad.configError, 'the manifest says it');
    assert.equal(exitCodeFor(bad), 4);
    assert.ok(readFileSync(path.join(dir, 'wrong-layer.tif')).equals(earlier), 'the earlier image is left as it was');
    for (const sidecar of ['wrong-layer.tfw', 'wrong-layer.prj', 'wrong-layer.tif.aux.xml'])
      assert.equal(existsSync(path.join(dir, sidecar)), false, `no ${sidecar}`);
    assert.match((m as unknown as { image: string }).image, /^not written: the run met a configuration error/);
    assert.deepEqual(
      bad.files.filter((f) => /wrong-layer\.(tif|tfw|prj|tif\.aux\.xml)$/.test(f)),
      [],
      'the files name no image or sidecar',
    );
    // One request at a time for a shape never served, and a batch stops after 3: at most 3 per batch started
    // before the first batch's summary came back (parallelBatches 2).
    assert.ok(badRequests >= 1 && badRequests <= 6, `requests for the wrong layer: ${badRequests}`);
    assert.ok(m.tiles.filter((t) => t.attempts > 0).length === badRequests);

    assert.equal(good.counts.ok, good.total, JSON.stringify(good.counts));
    assert.equal(good.configError, undefined);
    assert.equal(exitCodeFor(good), 0);
    const opened = (await transitions(proxy)).filter((t) => t.to === 'open');
    assert.deepEqual(opened, [], "the host's breaker never opened");
  });

  test('a wrong layer in a job of several blocks: later blocks are recorded failed with the error, not requested', async () => {
    const { proxy } = await server();
    const result = await run(
      request(proxy, 'wrong-layer-blocks', ['quadrantz'], { blockTiles: 32 }),
      'wrong-layer-blocks',
    );
    const m = readManifest(result);
    assert.equal(assertAccounted(m), null);
    assert.equal(m.counts.failed, result.total, JSON.stringify(m.counts));
    assert.ok(m.tiles.every((t) => t.configError === true));
    // Only the first block's first batches asked the server.
    assert.ok(proxy.count('quadrantz') <= 6, `requests: ${proxy.count('quadrantz')}`);
    assert.ok(m.tiles.slice(32).every((t) => t.attempts === 0));
    assert.equal(exitCodeFor(result), 4);
  });

  test('a layer that vanishes mid-run is systemic: the breaker opens on the failure ratio within about a second, the rest are dead letters (exit 3)', async () => {
    const { wms, proxy } = await server();
    let vanishedAt = 0;
    // After 60 tiles served the mapfile is redeployed without the layer.
    proxy.onRequest = (layers, nth) => {
      if (layers === 'quadrants' && nth === 61) {
        wms.renameLayer('quadrants', 'quadrants-redeploying');
        vanishedAt = Date.now();
      }
    };
    const result = await run(request(proxy, 'vanishing', ['quadrants']), 'vanishing');
    assert.ok(vanishedAt > 0, 'the layer vanished mid-run');
    const open = (await transitions(proxy)).find((t) => t.to === 'open');
    assert.ok(open, 'the breaker opened');
    const openMs = open.at - vanishedAt;
    const untilOpen = proxy.count('quadrants', vanishedAt, open.at);
    const afterVanish = proxy.count('quadrants', vanishedAt);
    console.log(
      `vanishing layer: opened (${open.reason}) ${openMs} ms after the layer vanished, after ${untilOpen} requests; ${afterVanish} requests after it vanished in all`,
    );

    assert.equal(open.reason, 'failure-ratio');
    assert.ok(openMs < 3_000, `opened ${openMs} ms after the layer vanished`);
    assert.ok(untilOpen <= 30, `requests until open: ${untilOpen}`);
    const m = readManifest(result);
    assert.equal(assertAccounted(m), null);
    assert.equal(result.configError, undefined, 'not a configuration error');
    assert.equal(m.counts.failed, 0, JSON.stringify(m.counts));
    assert.ok(m.counts.ok >= 55 && m.counts.ok <= 64, JSON.stringify(m.counts));
    assert.equal(m.counts.ok + m.counts['dead-lettered'], result.total);
    // Each dead letter is a systemic fault (a service exception, re-drivable) or a refusal by the open breaker.
    const dead = m.tiles.filter((t) => t.status === 'dead-lettered');
    assert.ok(
      dead.every(
        (t) =>
          (t.kind === 'service-exception' && /^systemic: LayerNotDefined/.test(t.reason)) ||
          t.breakerState !== undefined,
      ),
    );
    // The breaker counted the vanished layer's answers as service exceptions (systemic), not as permanent faults.
    // (Which dead letters still show that kind depends on timing: a retry the open breaker refused records the refusal.)
    const counted = /; (\d+) transient, (\d+) service-exception\)/.exec(open.detail);
    assert.ok(counted && Number(counted[2]) >= 1, `trip detail: ${open.detail}`);
    assert.equal(exitCodeFor(result), 3);
  });
  test('a mapfile redeployed before a run, on a worker restarted since the last good run, is systemic, not a configuration error: under wait the mosaic waits it out and completes (metatiles)', async () => {
    const { wms, proxy } = await server();
    // Each run on a worker process of its own: the second knows nothing of the first but the tile store.
    const policy = path.join(dir, 'redeploy-policy.json');
    writeFileSync(policy, JSON.stringify({ cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 }));
    const queue = uniqueTaskQueue('redeploy');
    const storeRoot = path.join(dir, 'redeploy-store');
    const metatiled = (name: string, fallback: 'fail-fast' | 'wait'): MosaicRequest => {
      const req = request(proxy, 'redeployed', ['quadrants'], {
        storeRoot,
        fallback,
        output: path.join(dir, `${name}.tif`),
        ...(fallback === 'wait' ? { deadline: '3m' } : {}),
      });
      return {
        ...req,
        source: {
          type: 'wms',
          url: proxy.url,
          layers: ['quadrants'],
          transparent: false,
          concurrency: 4,
          metatile: { size: [4, 4] },
        },
      };
    };
    // `stop`: ends what ran beside the mosaic while its worker is still up to answer queries.
    const onWorker = async (
      name: string,
      req: MosaicRequest,
      stop: () => Promise<void> = () => Promise.resolve(),
    ): Promise<MosaicResult> => {
      const w: WorkerProcess = startWorkerProcess(
        env.address,
        'default',
        queue,
        {},
        { args: ['--breaker-config', policy] },
      );
      try {
        await w.ready;
        return await (await startMosaic(env.client, queue, req, `${name}-${process.pid}`)).result();
      } finally {
        await stop();
        w.child.kill('SIGTERM');
        await w.exited;
      }
    };

    const good = await onWorker('redeploy-last-night', metatiled('redeploy-last-night', 'fail-fast'));
    assert.equal(readManifest(good).counts.ok, good.total, 'the good run fetched every tile');

    // The layer is renamed before the next run starts; put back once the breaker has opened on it.
    wms.renameLayer('quadrants', 'quadrants-redeploying');
    const since = Date.now();
    let restoredAt = 0;
    // Read while the worker that runs the entity is up (a query waits for a worker to answer it).
    let open: TransitionRecord | undefined;
    let watching = true;
    // One query at a time, every 200 ms, until the open is seen or the run ends.
    const watch = (async () => {
      while (watching && !restoredAt) {
        const o = (await transitions(proxy)).find((t) => t.to === 'open' && t.at >= since);
        if (o) {
          wms.renameLayer('quadrants-redeploying', 'quadrants');
          restoredAt = Date.now();
          open = o;
        } else await new Promise((r) => setTimeout(r, 200));
      }
    })();
    const result = await onWorker('redeploy-tonight', metatiled('redeploy-tonight', 'wait'), async () => {
      watching = false;
      await watch;
    });
    const opened = open;
    console.log(
      `redeploy before a run: opened (${opened?.reason}: ${opened?.detail}); ${proxy.count('quadrants', since, restoredAt || Infinity)} requests to the missing layer; exit ${exitCodeFor(result)}`,
    );
    assert.ok(restoredAt > 0 && opened, 'the breaker opened on the missing layer');
    assert.equal(opened.reason, 'failure-ratio', opened.detail);
    assert.match(
      opened.detail,
      /[1-9]\d* service-exception\)/,
      'counted as systemic (service exceptions), not as permanent faults',
    );
    assert.equal(result.configError, undefined, 'not a configuration error');
    const m = readManifest(result);
    assert.equal(assertAccounted(m), null);
    assert.deepEqual([m.counts.ok, exitCodeFor(result)], [result.total, 0], JSON.stringify(m.counts));
  });
});
