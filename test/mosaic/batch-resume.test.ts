import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { localBinaries } from '../../src/client/local-server';
import { withStartRetries } from '../../src/client/server-start';
import { startMosaic } from '../../src/client/mosaics';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { tileBounds } from '../../src/geo/mercator';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { TestWorkflowEnvironment as Env } from '@temporalio/testing';
import { assertAccounted, readManifest } from '../helpers/mosaic';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-resume-'));
const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

function worker(env: TestWorkflowEnvironment, taskQueue: string): WorkerProcess {
  const w = startWorkerProcess(env.address, env.namespace ?? 'default', taskQueue);
  cleanups.push(async () => {
    w.child.kill('SIGKILL');
    await w.exited;
  });
  return w;
}

/** One batch of `cols` x `rows` zoom-12 tiles, two requests in flight, from the demo tile server at `template`. */
function request(template: string, name: string, cols: number, rows: number): MosaicRequest {
  const [z, x0, y0] = [12, 2100, 1400];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + cols - 1, y0 + rows - 1);
  return {
    source: { type: 'xyz', url: template, concurrency: 2 },
    sourceName: 'demo',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: z,
    output: path.join(dir, name, 'mosaic.tif'),
    batchSize: cols * rows,
    parallelBatches: 1,
  };
}

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  t ? Number(t.seconds) * 1000 + Math.round((t.nanos ?? 0) / 1e6) : NaN;

test('a worker SIGKILLed mid-batch: the batch is retried within seconds and no tile it finished is fetched again', async () => {
  const env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  cleanups.push(() => env.teardown());
  const served = new Map<string, number>();
  const server = await startDemoTileServer({
    latencyMs: 100,
    onServed: (p) => served.set(p, (served.get(p) ?? 0) + 1),
  });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('resume-kill');
  const fleet = [worker(env, taskQueue), worker(env, taskQueue)];
  await Promise.all(fleet.map((w) => w.ready));
  // One batch of 400 tiles at 2 requests in flight, 100 ms each: about 20 s of fetching.
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(server.template, 'kill', 20, 20),
    `resume-kill-${process.pid}`,
  );
  for (const until = Date.now() + 180_000; Date.now() < until && server.stats.ok < 120;) await delay(50);
  assert.ok(server.stats.ok >= 120, `the batch got going (${server.stats.ok} tiles served)`);
  const running = (await handle.describe()).raw.pendingActivities?.[0]?.lastWorkerIdentity ?? '';
  const victim = fleet.find((w) => running.startsWith(w.identityPrefix));
  assert.ok(victim, `the batch runs on one of the fleet's workers (${running})`);
  victim.child.kill('SIGKILL');
  await victim.exited;
  const atKill = server.stats.ok;
  // The dead attempt's last heartbeat, on the server's clock.
  const lastBeat = ms((await handle.describe()).raw.pendingActivities?.[0]?.lastHeartbeatTime);
  // The retry, as the server saw it start (same clock).
  let retryStarted = NaN;
  for (let i = 0; i < 1_200 && Number.isNaN(retryStarted); i++) {
    const p = (await handle.describe()).raw.pendingActivities?.[0];
    if (p && (p.attempt ?? 0) >= 2 && p.lastStartedTime && p.lastWorkerIdentity !== running)
      retryStarted = ms(p.lastStartedTime);
    else await delay(100);
  }
  assert.ok(!Number.isNaN(retryStarted), 'the batch was retried');

  const result = await handle.result();
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.equal(m.counts.ok, 400, JSON.stringify(m.counts));
  const twice = [...served.values()].filter((n) => n > 1).length;
  console.log(
    `kill: ${atKill} tiles served at the kill, ${twice} fetched twice; retry started ${retryStarted - lastBeat} ms after the dead attempt's last heartbeat`,
  );
  // Only requests in flight at the kill (served, never stored) may go out again: at most the source's concurrency.
  assert.ok(twice <= 2, `${twice} tiles fetched twice`);
  // Each tile recorded once, with the request that stored it.
  assert.ok(
    m.tiles.every((t) => t.attempts === 1),
    'one request recorded per tile',
  );
  // Ordering, on the server's own clock: the retry started before a 20 s heartbeat timeout (the previous one)
  // could even have expired. With 6 s it starts about 8 s after (timeout, then the 2 s retry interval).
  assert.ok(retryStarted < lastBeat + 20_000, `retry started ${retryStarted - lastBeat} ms after the last heartbeat`);
  // The assembly removed the run's checkpoints.
  const work = readdirSync(path.join(dir, 'kill', 'mosaic.work'), { recursive: true }).map(String);
  assert.ok(work.some((f) => f.endsWith('.json')) && !work.some((f) => f.endsWith('.checkpoint')), work.join(', '));
});

/** A dev server with its state in a file, on a fixed port, so it can be stopped and started again. */
async function devServer(port: number | undefined, dbFilename: string): Promise<TestWorkflowEnvironment> {
  const { cli } = localBinaries();
  return withStartRetries(() =>
    Env.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path', path: cli } } : {}),
        ip: '127.0.0.1',
        ...(port ? { port } : {}),
        dbFilename,
        searchAttributes: BREAKER_SEARCH_ATTRIBUTES,
      },
    }),
  );
}

test('Temporal unreachable for longer than any heartbeat timeout while a batch fetches: its retry fetches nothing again', async () => {
  const db = path.join(dir, 'outage.sqlite');
  let env = await devServer(undefined, db);
  const address = env.address;
  const port = Number(address.split(':').pop());
  cleanups.push(() => env.teardown());
  const served = new Map<string, number>();
  const server = await startDemoTileServer({ latencyMs: 80, onServed: (p) => served.set(p, (served.get(p) ?? 0) + 1) });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('resume-outage');
  const w = worker(env, taskQueue);
  await w.ready;
  // 256 tiles, 2 in flight at 80 ms: about 10 s of fetching. Temporal goes down with the last 56 to fetch, so
  // the batch finishes unseen within a few seconds, before the worker itself gives up on an attempt it cannot
  // heartbeat for (the batch's 6 s heartbeat timeout): the tiles in flight then would be fetched again.
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(server.template, 'outage', 16, 16),
    `resume-outage-${process.pid}`,
  );
  // Waits for the state, not a time: on a loaded machine the batch may take far longer than its 10 s.
  for (const until = Date.now() + 180_000; Date.now() < until && server.stats.ok < 200;) await delay(20);
  assert.ok(
    server.stats.ok >= 200 && server.stats.ok < 256,
    `the batch is under way (${server.stats.ok} of 256 tiles)`,
  );
  await env.teardown();
  const downAt = server.stats.ok;
  // Down longer than the 20 s heartbeat timeout of before: the batch finishes unseen (its completion is lost),
  // or, cut off for its 6 s heartbeat timeout, stops requesting; either way the server retries it from its last
  // heartbeat before the outage, and the retry fetches only what no attempt stored.
  await delay(22_000);
  // (The cleanup above tears down whichever server `env` names by then.)
  env = await devServer(port, db);
  const result = (await env.client.workflow.getHandle(handle.workflowId).result()) as MosaicResult;
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.equal(m.counts.ok, 256, JSON.stringify(m.counts));
  const twice = [...served.values()].filter((n) => n > 1).length;
  console.log(
    `outage: ${downAt} tiles served when Temporal went down, ${server.stats.ok} served in all, ${twice} fetched twice`,
  );
  assert.equal(twice, 0, `${twice} tiles fetched twice`);
  assert.ok(
    m.tiles.every((t) => t.attempts === 1),
    'one request recorded per tile',
  );
});
