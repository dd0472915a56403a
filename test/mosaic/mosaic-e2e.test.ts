import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import sharp from 'sharp';
import { gridBounds, planMosaic } from '../../src/activities/mosaic/plan';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { exitCodeFor, mosaicStatus, startMosaic } from '../../src/client/mosaics';
import { createMosaicSchedule, deleteSchedule, listSchedules } from '../../src/client/schedules';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { adminSignal, statusQuery, transitionsQuery } from '../../src/messages/breaker';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, gdalAvailable, gdalinfo, readManifest, demoRequest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('mosaic');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-mosaic-'));
const servers: DemoTileServer[] = [];

// Quick to trip and quick to cool down, so an outage of a few seconds shows the whole cycle.
const BREAKER = { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 } };

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
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  for (const s of servers) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

async function server(opts: Parameters<typeof startDemoTileServer>[0] = {}): Promise<DemoTileServer> {
  const s = await startDemoTileServer(opts);
  servers.push(s);
  return s;
}

const request = (s: DemoTileServer, name: string, extra: Partial<MosaicRequest> = {}): MosaicRequest =>
  demoRequest(s, dir, name, extra);

async function run(req: MosaicRequest, id: string): Promise<MosaicResult> {
  const handle = await startMosaic(env.client, taskQueue, req, id);
  return handle.result();
}

/**
 * Ends the demo server's outage once its breaker has left closed, and `afterMs` more: an outage that lasts
 * until the trip, however long a loaded machine takes to trip, so tiles are refused in every run (a fixed
 * 2.5 s outage was once over before the breaker opened, and every tile failed on its own retries instead).
 */
async function endOutageAfterTrip(s: DemoTileServer, afterMs = 1_500): Promise<void> {
  const handle = env.client.workflow.getHandle(breakerWorkflowId(breakerKey(s.url)));
  for (let i = 0; i < 600; i++) {
    const status = await handle.query(statusQuery).catch(() => null);
    if (status && status.view.state !== 'closed') break;
    await delay(100);
  }
  await delay(afterMs);
  s.setDown(false);
}

const resetBreaker = (s: DemoTileServer) =>
  env.client.workflow
    .getHandle(breakerWorkflowId(breakerKey(s.url)))
    .signal(adminSignal, { action: 'reset', reason: 'test' });

test("fail-fast: an outage mid-run dead-letters the refused tiles, every tile is in the manifest, GDAL reads EPSG:3857 and the plan's geotransform; a re-drive fetches only the dead letters", async () => {
  // Down from its 41st request until 1.5 s after the breaker opened.
  const s = await server({ latencyMs: 5, outageAfterRequests: 40, outageMs: 120_000 });
  const req = request(s, 'fail-fast', { fallback: 'fail-fast' });
  const [result] = await Promise.all([run(req, `mosaic-ff-${process.pid}`), endOutageAfterTrip(s)]);
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.equal(m.total, 130);
  assert.ok(m.counts['dead-lettered'] > 0, `some tiles dead-lettered: ${JSON.stringify(m.counts)}`);
  // The server goes down at its 41st request; answers still pending then fail too, so a few less than 40.
  assert.ok(m.counts.ok >= 30, `tiles before the outage are ok: ${JSON.stringify(m.counts)}`);
  assert.equal(m.counts.ok + m.counts['dead-lettered'], 130);
  // Refused while open, or while half-open (one probe out): with a 1 s cooldown the outage cycles through both.
  const refused = m.tiles.filter((t) => t.breakerState === 'open' || t.breakerState === 'half-open');
  const seen = [
    ...new Set(
      m.tiles.filter((t) => t.status !== 'ok').map((t) => `${t.breakerState ?? '-'} ${t.reason.slice(0, 90)}`),
    ),
  ].slice(0, 6);
  if (!refused.length) {
    const log = await env.client.workflow
      .getHandle(breakerWorkflowId(breakerKey(s.url)))
      .query(transitionsQuery)
      .catch(() => []);
    assert.fail(
      `the breaker refused no tile: ${JSON.stringify(seen)}; transitions ${JSON.stringify(log.map((t) => [t.to, t.reason, new Date(t.at).toISOString().slice(11, 23)]))}; outage ${JSON.stringify(s.stats)}`,
    );
  }
  // Refused at once, or on an in-activity retry after a failed attempt: dead-lettered either way.
  assert.ok(refused.every((t) => t.status === 'dead-lettered'));
  assert.ok(
    refused.some((t) => t.attempts === 0),
    'most refusals cost no request at all',
  );
  // The breaker kept most of the outage's requests away from the server.
  assert.ok(
    s.stats.whileDown < m.counts['dead-lettered'],
    `requests while down ${s.stats.whileDown} < dead-lettered ${m.counts['dead-lettered']}`,
  );

  if (gdalAvailable()) {
    const info = gdalinfo(result.output);
    const plan = await planMosaic(req);
    const b = gridBounds(plan.grid);
    const res = (b.maxX - b.minX) / info.size[0]!;
    const expected = [b.minX, res, 0, b.maxY, 0, -res];
    info.geoTransform.forEach((v, k) =>
      assert.ok(Math.abs(v - expected[k]!) <= 1e-6, `geotransform[${k}] ${v} vs ${expected[k]}`),
    );
    assert.match(info.coordinateSystem.wkt, /Pseudo-Mercator|3857/);
    assert.deepEqual(info.size, [13 * 256, 10 * 256]);
  }

  // Re-drive once the renderer is back: only the dead letters are fetched, and the mosaic becomes whole.
  while (s.isDown()) await delay(100);
  await resetBreaker(s);
  const before = s.stats.requests;
  const dead = m.counts['dead-lettered'];
  const redrive = await env.client.workflow.start('redriveMosaicWorkflow', {
    taskQueue,
    workflowId: `redrive-ff-${process.pid}`,
    args: [{ manifest: result.manifest }],
  });
  const r2 = (await redrive.result()) as MosaicResult;
  const m2 = readManifest(r2);
  assert.equal(assertAccounted(m2), null);
  assert.equal(m2.counts.ok, 130);
  assert.equal(s.stats.requests - before, dead, 'the re-drive requested exactly the dead-lettered tiles');
  assert.ok(m2.tiles.filter((t) => t.pass > 0).length === dead);
});

test('a re-drive that reads the sources file again uses the source as fixed since the run, and refuses one that draws other tiles', async () => {
  const s = await server({ latencyMs: 2 });
  // The run's source names a credential nobody set: every tile fails as a configuration error, no request made.
  // Credentials come only with sources from a sources file (an inline source could send them anywhere).
  const brokenFile = path.join(dir, 'broken-sources.yaml');
  writeFileSync(
    brokenFile,
    `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    concurrency: 2\n    auth: { type: bearer, tokenEnv: TB_TEST_UNSET_TOKEN }\n`,
  );
  const { source: _inline, ...broken } = request(s, 'fixed', { zoom: 6 });
  const result = await run({ ...broken, sourcesFile: brokenFile }, `mosaic-fixed-${process.pid}`);
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.ok(m.tiles.length > 0 && m.tiles.every((t) => t.status === 'failed'), JSON.stringify(m.counts));
  assert.equal(s.stats.requests, 0);
  // The sources file as it is now: no credential needed.
  const sourcesFile = path.join(dir, 'fixed-sources.yaml');
  writeFileSync(sourcesFile, `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    concurrency: 2\n`);
  const r2 = (await env.client.workflow.execute('redriveMosaicWorkflow', {
    taskQueue,
    workflowId: `redrive-fixed-${process.pid}`,
    args: [{ manifest: result.manifest, sources: { sourcesFile } }],
  })) as MosaicResult;
  const m2 = readManifest(r2);
  assert.equal(assertAccounted(m2), null);
  assert.equal(m2.counts.ok, m.tiles.length);
  assert.equal(s.stats.requests, m.tiles.length, 'each failed tile fetched once, from the fixed source');
  // A source with another tile size would not fit the planned grid.
  const other = path.join(dir, 'other-sources.yaml');
  writeFileSync(other, `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    tileSize: 512\n`);
  await assert.rejects(
    env.client.workflow.execute('redriveMosaicWorkflow', {
      taskQueue,
      workflowId: `redrive-other-${process.pid}`,
      args: [{ manifest: result.manifest, sources: { sourcesFile: other } }],
    }),
    (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      const app = (err.cause as { cause?: { type?: string; message?: string } } | undefined)?.cause;
      assert.equal(app?.type, 'ConfigError');
      assert.match(app?.message ?? '', /source "demo" has tileSize 512, the mosaic was planned with 256/);
      return true;
    },
  );
});

test('hole: refused tiles are left transparent and marked not rendered, in the manifest, the TIFF and the mask', async () => {
  const s = await server({ latencyMs: 5, outageAfterRequests: 30, outageMs: 60_000 });
  const result = await run(request(s, 'hole', { fallback: 'hole' }), `mosaic-hole-${process.pid}`);
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  const holes = m.tiles.filter((t) => t.status === 'hole');
  assert.ok(
    holes.length > 0 &&
      holes.every(
        (t) => /not rendered/.test(t.reason) && (t.breakerState === 'open' || t.breakerState === 'half-open'),
      ),
  );
  const cols = 13;
  const { data, info } = await sharp(result.output).raw().toBuffer({ resolveWithObject: true });
  const alphaAt = (i: number) =>
    data[((Math.floor(i / cols) * 256 + 128) * info.width + (i % cols) * 256 + 128) * info.channels + 3];
  assert.equal(alphaAt(holes[0]!.i), 0, 'a hole is transparent');
  assert.equal(alphaAt(m.tiles.find((t) => t.status === 'ok')!.i), 255, 'an ok tile is opaque');
  const mask = await sharp(result.mask).raw().toBuffer({ resolveWithObject: true });
  assert.equal(mask.data[holes[0]!.i * mask.info.channels], 0);
  assert.equal(mask.data[0], 255);
  s.setDown(false);
});

test('stale: with the renderer down from the start, refused tiles are served from the last good copy, marked stale', async () => {
  const s = await server({ latencyMs: 2 });
  const store = path.join(dir, 'stale-store');
  const first = await run(request(s, 'stale-1', { storeRoot: store }), `mosaic-stale1-${process.pid}`);
  assert.equal(first.counts.ok, 130);
  s.setDown(true);
  const result = await run(
    request(s, 'stale-2', { storeRoot: store, fallback: 'stale' }),
    `mosaic-stale2-${process.pid}`,
  );
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.ok(m.counts.stale > 60, `most tiles stale: ${JSON.stringify(m.counts)}`);
  assert.equal(
    m.counts.stale + m.counts['dead-lettered'],
    130,
    'tiles that failed before the breaker opened are dead letters',
  );
  assert.ok(m.tiles.filter((t) => t.status === 'stale').every((t) => /served the copy fetched/.test(t.reason)));
  // Stale tiles are drawn: the mosaic has no transparent stale cell.
  const mask = await sharp(result.mask).raw().toBuffer({ resolveWithObject: true });
  assert.equal(mask.data[m.tiles.find((t) => t.status === 'stale')!.i * mask.info.channels], 160);
  s.setDown(false);
  await resetBreaker(s);
});

test('a re-run that meets an outage draws its gaps from their earlier copies in the store, marked as such: the image keeps what it had', async () => {
  const s = await server({ latencyMs: 2 });
  const req = request(s, 'rerun', { storeRoot: path.join(dir, 'rerun-store') });
  const first = await run(req, `mosaic-rerun1-${process.pid}`);
  assert.equal(first.counts.ok, 130);
  const before = await sharp(first.output).raw().toBuffer();
  s.setDown(true);
  const result = await run(req, `mosaic-rerun2-${process.pid}`);
  const m = readManifest(result) as ReturnType<typeof readManifest> & { earlierCopies: number };
  assert.equal(assertAccounted(m), null);
  // Nothing was served: every tile is a gap, and a re-drive's business, as before.
  assert.equal(m.counts.ok + m.counts.stale, 0, JSON.stringify(m.counts));
  assert.equal(exitCodeFor(result), 3);
  const gaps = m.tiles.filter((t) => t.status === 'dead-lettered' || t.status === 'failed');
  assert.equal(gaps.length, 130);
  assert.ok(
    gaps.every(
      (t) => t.earlierCopyFetchedAt !== undefined && Date.parse(t.earlierCopyFetchedAt) > 0 && t.path !== undefined,
    ),
    'each gap names the copy drawn',
  );
  assert.equal(result.earlierCopies, 130);
  assert.equal(m.earlierCopies, 130);
  assert.ok((await sharp(result.output).raw().toBuffer()).equals(before), 'the same pixels as the run before');
  const mask = await sharp(result.mask).raw().toBuffer({ resolveWithObject: true });
  assert.equal(mask.data[gaps[0]!.i * mask.info.channels], 160, 'the mask marks them drawn from a stale copy');
  s.setDown(false);
  await resetBreaker(s);
});

test('wait: refused tiles wait on a durable timer for the breaker and are fetched after the outage; nothing is lost', async () => {
  // Down until 1.5 s after the breaker opened: a fixed 3 s outage was once absorbed by the tiles' own retries.
  const s = await server({ latencyMs: 5, outageAfterRequests: 40, outageMs: 120_000 });
  const [result] = await Promise.all([
    run(request(s, 'wait', { fallback: 'wait', deadline: '2m' }), `mosaic-wait-${process.pid}`),
    endOutageAfterTrip(s),
  ]);
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  const waited = m.tiles.filter((t) => t.pass > 0);
  assert.ok(waited.length > 0, 'some tiles were fetched in a later pass');
  // Refused tiles and tiles that failed while the breaker was tripping all waited, and all came back.
  assert.equal(m.counts.ok, 130, JSON.stringify(m.counts));

  // The same output again (tomorrow night): its manifest is its own, nothing carried over from the waits.
  const again = await run(request(s, 'wait', { fallback: 'wait', deadline: '2m' }), `mosaic-wait-again-${process.pid}`);
  const m2 = readManifest(again);
  assert.equal(assertAccounted(m2), null);
  assert.equal(m2.counts.ok, 130);
  assert.ok(
    m2.tiles.every((t) => t.pass === 0),
    "every tile from this run's first pass",
  );
});

test('bad requests are refused before any fetch, naming the field and the value', async () => {
  const s = await server();
  const cases: [Partial<MosaicRequest>, RegExp][] = [
    [{ bbox: [10, 40, 5, 45] }, /bbox: west must be less than east .*got \[10,40,5,45\]/],
    [{ bbox: [5, 45, 10, 45] }, /bbox: south must be less than north/],
    [{ zoom: 23 }, /zoom: must be within the source's range 0\.\.22 \(got 23\)/],
    [{ maxTiles: 50 }, /maxTiles: the plan has 130 tiles \(13 columns x 10 rows at zoom 8\), more than maxTiles 50/],
    [{ fallback: 'wait' }, /deadline: is required when fallback is "wait"/],
  ];
  for (const [extra, message] of cases) {
    await assert.rejects(planMosaic(request(s, 'bad', extra)), message);
  }
  // Through the workflow: it fails with the same message, without a retry, without a request.
  const handle = await env.client.workflow.start('mosaicWorkflow', {
    taskQueue,
    workflowId: `mosaic-bad-${process.pid}`,
    args: [request(s, 'bad', { zoom: 23 })],
  });
  await assert.rejects(handle.result(), (err: unknown) => {
    assert.ok(err instanceof WorkflowFailedError);
    const app = (err.cause as { cause?: { type?: string; message?: string; nonRetryable?: boolean } } | undefined)
      ?.cause;
    assert.equal(app?.type, 'ConfigError');
    assert.match(app?.message ?? '', /zoom: must be within the source's range 0\.\.22 \(got 23\)/);
    return true;
  });
  // Planned once: a ConfigError is not retried.
  const history = await handle.fetchHistory();
  assert.equal(
    history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'planMosaic').length,
    1,
  );
  assert.equal(s.stats.requests, 0);
  // And the client refuses it before starting anything.
  await assert.rejects(
    startMosaic(env.client, taskQueue, request(s, 'bad', { bbox: [10, 40, 5, 45] })),
    /west must be less than east/,
  );
});

test('cancel: the mosaic stops and writes a partial manifest that still accounts for every tile', async () => {
  const s = await server({ latencyMs: 150 });
  const handle = await startMosaic(env.client, taskQueue, request(s, 'cancel'), `mosaic-cancel-${process.pid}`);
  for (let i = 0; i < 100 && s.stats.requests < 20; i++) await delay(100);
  await handle.cancel();
  await assert.rejects(handle.result());
  const st = await mosaicStatus(env.client, handle.workflowId);
  assert.equal(st.status, 'CANCELLED');
  const m = readManifest({ manifest: path.join(dir, 'cancel.manifest.json') });
  assert.equal(m.partial, true);
  assert.equal(assertAccounted(m), null);
  assert.ok(m.counts.ok > 0 && m.counts['dead-lettered'] > 0, JSON.stringify(m.counts));
  // The batches in flight were waited for: every tile the server delivered before the cancel is recorded
  // (give or take the requests it answered just as they were aborted).
  assert.ok(
    m.counts.ok >= s.stats.ok - 4 && m.counts.ok <= s.stats.ok,
    `manifest ok ${m.counts.ok}, server served ${s.stats.ok}`,
  );
  // A re-drive of the cancelled mosaic finishes it.
  await resetBreaker(s).catch(() => undefined);
  const r = await env.client.workflow.start('redriveMosaicWorkflow', {
    taskQueue,
    workflowId: `redrive-cancel-${process.pid}`,
    args: [{ manifest: path.join(dir, 'cancel.tif') }],
  });
  const done = readManifest((await r.result()) as MosaicResult);
  assert.equal(done.counts.ok, 130);
  assert.equal(done.partial, false);
});

test('cancel means cancel when every batch is already in flight: the mosaic ends CANCELLED with a partial manifest, not COMPLETED', async () => {
  const s = await server({ latencyMs: 150 });
  // Two batches of 65 tiles, both running from the start: no batch is left to not start.
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(s, 'cancel-all', { batchSize: 65, parallelBatches: 2 }),
    `mosaic-cancel-all-${process.pid}`,
  );
  for (let i = 0; i < 100 && s.stats.requests < 6; i++) await delay(100);
  await handle.cancel();
  await assert.rejects(handle.result());
  const st = await mosaicStatus(env.client, handle.workflowId);
  assert.equal(st.status, 'CANCELLED');
  const m = readManifest({ manifest: path.join(dir, 'cancel-all.manifest.json') });
  assert.equal(m.partial, true);
  assert.equal(assertAccounted(m), null);
  assert.ok(m.counts.ok < 130, JSON.stringify(m.counts));
});

test('a job larger than a block runs child workflows, each history bounded', async () => {
  const s = await server();
  const result = await run(request(s, 'blocks', { blockTiles: 48, batchSize: 16 }), `mosaic-blocks-${process.pid}`);
  assert.equal(result.counts.ok, 130);
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  const children: string[] = [];
  for await (const wf of env.client.workflow.list({ query: `WorkflowId STARTS_WITH "mosaic-blocks-${process.pid}/"` }))
    children.push(wf.workflowId);
  assert.equal(children.length, 3, children.join(', '));
  assert.ok(existsSync(result.output));
});

test('schedules: create a nightly mosaic with overlap skip, list it, delete it', async () => {
  const s = await server();
  const id = `nightly-${process.pid}`;
  await createMosaicSchedule(env.client, taskQueue, id, '0 2 * * *', request(s, 'nightly'));
  const desc = await env.client.schedule.getHandle(id).describe();
  assert.equal(desc.policies.overlap, 'SKIP');
  assert.equal(desc.action.type, 'startWorkflow');
  const listed = await listSchedules(env.client);
  const mine = listed.find((x) => x.scheduleId === id);
  assert.ok(mine, 'listed');
  assert.deepEqual(mine.cron, ['0 2 * * *']);
  assert.ok(mine.nextRuns[0]!.endsWith('T02:00:00.000Z'));
  await deleteSchedule(env.client, id);
  await assert.rejects(deleteSchedule(env.client, id), /no schedule with id/);
});
