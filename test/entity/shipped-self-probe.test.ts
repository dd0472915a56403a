import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { LearnedProbes } from '../../src/activities/guard/learned-probes';
import { startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { statusQuery, transitionsQuery, type BreakerStatus, type EntityExit } from '../../src/messages/breaker';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, demoRequest, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

/*
 * The self-probe in the worker as shipped: createWorker (what `tilebreaker worker` runs) gives its guard no
 * probe, and the guard learns one from the worker's own fetches. An outage opens the breaker, the mosaic ends,
 * nothing else calls the server, the server recovers: the entity probes it by itself, closes, and ends idle.
 */

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-shipped-probe-'));
const taskQueue = uniqueTaskQueue('shipped-probe');
// Quick to trip and to cool down, and quick to end idle (the CLI's worker keeps the 1 h default).
const BREAKER = {
  config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 },
  entityOptions: { idleMs: 4_000 },
};
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let server: DemoTileServer;

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    breaker: BREAKER,
    roots: TEST_ROOTS,
  });
  running = worker.run();
  server = await startDemoTileServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 10 * 60_000 });
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a half-open breaker with no traffic probes the tile server by itself, closes, and ends idle', async () => {
  const req = demoRequest(server, dir, 'outage', { fallback: 'fail-fast' });
  const result = await (await startMosaic(env.client, taskQueue, req, `mosaic-shipped-probe-${process.pid}`)).result();
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.ok(
    m.counts['dead-lettered'] > 0 && server.isDown(),
    `the outage left dead letters: ${JSON.stringify(m.counts)}`,
  );

  const key = breakerKey(server.template);
  const handle = env.client.workflow.getHandle(breakerWorkflowId(key));
  const tripped = await handle.query(statusQuery);
  assert.notEqual(tripped.view.state, 'closed', 'the outage opened the breaker');
  // The probe is a tile this worker fetched with success: on the server, no credentials, stored as sent.
  assert.ok(tripped.probe, 'the entity has a self-probe');
  assert.match(tripped.probe.url, new RegExp(`^${server.url.replace(/[.]/g, '\\.')}/8/\\d+/\\d+\\.png$`));

  // No traffic from here on but the entity's own probes; the server recovers.
  const before = server.stats.requests;
  server.setDown(false);
  let status: BreakerStatus = tripped;
  for (let i = 0; i < 240 && status.view.state !== 'closed'; i++) {
    await delay(250);
    status = await handle.query(statusQuery);
  }
  assert.equal(status.view.state, 'closed', `closed by itself; last: ${JSON.stringify(status.view)}`);
  assert.ok(
    status.counters.selfProbes >= 3,
    `closed by its own probes (probesToClose 3): ${JSON.stringify(status.counters)}`,
  );
  const closing = (await handle.query(transitionsQuery, 5)).find((t) => t.to === 'closed');
  assert.equal(closing?.from, 'half-open');
  assert.ok(server.stats.requests - before >= 3, 'the probes reached the server');

  // Closed and quiet for idleMs: the run ends, and says why.
  const exit = (await Promise.race([handle.result(), delay(120_000).then(() => null)])) as EntityExit | null;
  assert.ok(exit, 'the entity ended idle');
  assert.equal(exit.reason, 'idle');
  assert.ok(exit.counters.selfProbes >= 3);
});

test('a source with credentials probes by itself too: the entity keeps its sources file and name, never the token, and its probes send the token', async () => {
  // The demo tile server behind a front that wants a bearer token; the token is in the worker's environment.
  const upstream = await startDemoTileServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 10 * 60_000 });
  const token = 'probe-t0ken-' + process.pid;
  let authorized = 0;
  const front = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end('token required');
    authorized++;
    const up = httpRequest(
      `${upstream.url}${req.url}`,
      { headers: { 'user-agent': req.headers['user-agent'] ?? '' } },
      (a) => {
        res.writeHead(a.statusCode ?? 502, a.headers);
        a.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    up.end();
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  const file = path.join(dir, 'secured-sources.yaml');
  writeFileSync(
    file,
    `sources:\n  secured:\n    type: xyz\n    url: ${origin}/{z}/{x}/{y}.png\n    concurrency: 2\n    auth: { type: bearer, tokenEnv: TB_SHIPPED_PROBE_TOKEN }\n    timeouts: { connectMs: 1000, headersMs: 2000, bodyMs: 2000, totalMs: 3000 }\n`,
  );
  process.env['TB_SHIPPED_PROBE_TOKEN'] = token;
  try {
    const { source: _inline, ...rest } = demoRequest(upstream, dir, 'secured', { fallback: 'fail-fast' });
    const req = { ...rest, sourcesFile: file, sourceName: 'secured' };
    const result = await (
      await startMosaic(env.client, taskQueue, req, `mosaic-secured-probe-${process.pid}`)
    ).result();
    assert.ok(readManifest(result).counts['dead-lettered'] > 0 && upstream.isDown());
    const handle = env.client.workflow.getHandle(breakerWorkflowId(breakerKey(origin)));
    const tripped = await handle.query(statusQuery);
    assert.notEqual(tripped.view.state, 'closed');
    assert.deepEqual(tripped.probe?.source, { file, name: 'secured' }, 'the probe names the source');
    assert.doesNotMatch(
      JSON.stringify(await handle.fetchHistory()),
      new RegExp(token),
      "the token is nowhere in the entity's history",
    );
    const before = authorized;
    upstream.setDown(false);
    let status: BreakerStatus = tripped;
    for (let i = 0; i < 240 && status.view.state !== 'closed'; i++) {
      await delay(250);
      status = await handle.query(statusQuery);
    }
    assert.equal(status.view.state, 'closed', `closed by its own probes; last: ${JSON.stringify(status.view)}`);
    assert.ok(authorized - before >= 3, 'the probes went through the front with the token');
  } finally {
    delete process.env['TB_SHIPPED_PROBE_TOKEN'];
    front.close();
    await upstream.close();
  }
});

test('a learned probe carries nothing secret and is only ever http(s)', () => {
  const p = new LearnedProbes();
  p.learn('k1', 'https://tiles.example.test/1/2/3.png?apikey=abc123', 'ua');
  assert.equal(p.spec('k1'), undefined, 'a credential-like query parameter');
  p.learn('k1', 'https://me:pw@tiles.example.test/1/2/3.png');
  assert.equal(p.spec('k1'), undefined, 'a user and password');
  p.learn('k1', 'ftp://tiles.example.test/1/2/3.png');
  assert.equal(p.spec('k1'), undefined, 'not http(s)');
  p.learn('k1', 'https://tiles.example.test/1/2/3.png', 'tilebreaker/1');
  p.learn('k1', 'https://tiles.example.test/9/9/9.png');
  assert.deepEqual(
    p.spec('k1'),
    { url: 'https://tiles.example.test/1/2/3.png', headers: { 'user-agent': 'tilebreaker/1' } },
    'the first fit one, kept',
  );
});
