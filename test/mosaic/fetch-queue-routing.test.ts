import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { createActivityRuntime } from '../../src/activities';
import { servedFetchQueue } from '../../src/activities/mosaic/fetch-queue';
import { startMosaic } from '../../src/client/mosaics';
import { createFetchWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { tileBounds } from '../../src/geo/mercator';
import { fetchTaskQueue } from '../../src/messages/activities';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue, workflowsPath } from '../helpers/temporal-env';

// Where a mosaic's fetch batches go: `<queue>-fetch` only while a worker polls it (the planning activity asks
// the server), else the mosaic's own queue, which a worker of your own (createActivityRuntime + the workflows,
// no fetch worker) serves. In-process workers built as docs/library.md builds them.

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-fetch-routing-'));
let env: TestWorkflowEnvironment;
let server: DemoTileServer;
before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  server = await startDemoTileServer({ latencyMs: 5 });
});
after(async () => {
  await server?.close();
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

/** 64 zoom-12 tiles in 8 batches of 8. */
function request(name: string): MosaicRequest {
  const [z, x0, y0] = [12, 2100, 1400];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + 7, y0 + 7);
  return {
    source: { type: 'xyz', url: server.template, concurrency: 2 },
    sourceName: 'demo',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: z,
    output: path.join(dir, name, 'mosaic.tif'),
    batchSize: 8,
    parallelBatches: 2,
  };
}

/** A worker of one's own on the main queue only: tilebreaker's workflows and activities, no fetch worker. */
async function ownWorker(taskQueue: string, fetchQueueStartWithinMs?: number) {
  const runtime = createActivityRuntime({
    client: env.client,
    taskQueue,
    roots: TEST_ROOTS,
    ...(fetchQueueStartWithinMs ? { fetchQueueStartWithinMs } : {}),
  });
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    workflowsPath,
    activities: runtime.activities,
  });
  return { runtime, worker };
}

/** Fails instead of hanging: a batch on a queue nobody serves never completes. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done in ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface BatchEvent {
  queue: string;
  outcome: 'completed' | 'timed-out' | 'other';
  identity?: string;
}

/** The mosaic's fetch batches: the queue each was scheduled on, how it ended, and who ran it. */
async function batches(workflowId: string): Promise<BatchEvent[]> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const byId = new Map<string, BatchEvent>();
  const out: BatchEvent[] = [];
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s?.activityType?.name === 'fetchMosaicBatch') {
      const b: BatchEvent = { queue: s.taskQueue?.name ?? '', outcome: 'other' };
      byId.set(String(e.eventId), b);
      out.push(b);
    }
    const st = e.activityTaskStartedEventAttributes;
    if (st && byId.has(String(st.scheduledEventId)))
      byId.get(String(st.scheduledEventId))!.identity = st.identity ?? '';
    const done = e.activityTaskCompletedEventAttributes;
    if (done && byId.has(String(done.scheduledEventId))) byId.get(String(done.scheduledEventId))!.outcome = 'completed';
    const to = e.activityTaskTimedOutEventAttributes;
    if (to && byId.has(String(to.scheduledEventId))) byId.get(String(to.scheduledEventId))!.outcome = 'timed-out';
  }
  return out;
}

test('nobody polls <queue>-fetch: a worker of your own (main queue only) finishes the mosaic, every batch on the main queue', async () => {
  const taskQueue = uniqueTaskQueue('routing-none');
  const { runtime, worker } = await ownWorker(taskQueue);
  try {
    const result = await worker.runUntil(async () => {
      const handle = await startMosaic(env.client, taskQueue, request('none'), `routing-none-${process.pid}`);
      // The reverted cap sent every batch to <queue>-fetch here, and the mosaic never finished.
      const r: MosaicResult = await within(90_000, 'the mosaic', handle.result());
      return { r, b: await batches(handle.workflowId) };
    });
    assert.equal(result.r.counts.ok, 64);
    assert.equal(result.b.length, 8);
    assert.deepEqual([...new Set(result.b.map((b) => `${b.queue} ${b.outcome}`))], [`${taskQueue} completed`]);
  } finally {
    await runtime.close();
  }
});

test('opted in with createFetchWorker: while it polls, the plan names <queue>-fetch and the fetch worker runs every batch', async () => {
  const taskQueue = uniqueTaskQueue('routing-opt-in');
  const { runtime, worker } = await ownWorker(taskQueue);
  const fetcher = await createFetchWorker({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    activities: runtime.activities,
    fetchBatches: 2,
    identity: `fetcher-${process.pid}`,
  });
  try {
    const fetching = fetcher.run();
    const result = await worker.runUntil(async () => {
      // Its first poll reaches the server within moments of run().
      for (let i = 0; i < 100 && !(await servedFetchQueue(env.client, taskQueue, 60_000)); i++) await delay(100);
      const handle = await startMosaic(env.client, taskQueue, request('opt-in'), `routing-opt-in-${process.pid}`);
      const r: MosaicResult = await within(90_000, 'the mosaic', handle.result());
      return { r, b: await batches(handle.workflowId) };
    });
    fetcher.shutdown();
    await fetching;
    assert.equal(result.r.counts.ok, 64);
    assert.equal(result.b.length, 8);
    assert.deepEqual(
      [...new Set(result.b.map((b) => `${b.queue} ${b.outcome} ${b.identity}`))],
      [`${fetchTaskQueue(taskQueue)} completed fetcher-${process.pid}`],
    );
  } finally {
    if (fetcher.getState() === 'RUNNING') fetcher.shutdown();
    await runtime.close();
  }
});

test('the plan said served but the fetch worker has gone (the server still lists it): each batch waits startWithinMs, then runs on the main queue', async () => {
  const taskQueue = uniqueTaskQueue('routing-gone');
  const { runtime, worker } = await ownWorker(taskQueue, 2_000);
  // A fetch worker polls, then stops: the server keeps listing its poll for minutes.
  const fetcher = await createFetchWorker({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    activities: runtime.activities,
  });
  const fetching = fetcher.run();
  for (let i = 0; i < 100 && !(await servedFetchQueue(env.client, taskQueue, 60_000)); i++) await delay(100);
  fetcher.shutdown();
  await fetching;
  assert.ok(
    await servedFetchQueue(env.client, taskQueue, 60_000),
    'the server still lists the stopped fetch worker (else this test tests nothing)',
  );
  try {
    const started = Date.now();
    const result = await worker.runUntil(async () => {
      const handle = await startMosaic(env.client, taskQueue, request('gone'), `routing-gone-${process.pid}`);
      const r: MosaicResult = await within(90_000, 'the mosaic', handle.result());
      return { r, b: await batches(handle.workflowId) };
    });
    assert.equal(result.r.counts.ok, 64);
    const onFetch = result.b.filter((b) => b.queue === fetchTaskQueue(taskQueue));
    const onMain = result.b.filter((b) => b.queue === taskQueue);
    // Every batch went to the fetch queue first (the plan said served), timed out unstarted, and ran on the main queue.
    assert.equal(onFetch.length, 8);
    assert.deepEqual(
      [...new Set(onFetch.map((b) => `${b.outcome} ${b.identity ?? 'never started'}`))],
      ['timed-out never started'],
    );
    assert.equal(onMain.length, 8);
    assert.deepEqual([...new Set(onMain.map((b) => b.outcome))], ['completed']);
    // 8 batches, 2 at a time, each waiting 2 s: at least 8 s.
    assert.ok(Date.now() - started >= 8_000, `took ${Date.now() - started} ms`);
  } finally {
    await runtime.close();
  }
});

test('bad options are refused, naming the option and the value', async () => {
  for (const bad of [999, 1.5, 86_400_001]) {
    assert.throws(
      () =>
        createActivityRuntime({ client: env.client, taskQueue: 'q', roots: TEST_ROOTS, fetchQueueStartWithinMs: bad }),
      {
        message: `fetchQueueStartWithinMs must be a whole number of milliseconds from 1000 to 86400000 (got ${bad})`,
      },
    );
  }
  const runtime = createActivityRuntime({ client: env.client, taskQueue: 'q', roots: TEST_ROOTS });
  try {
    await assert.rejects(
      createFetchWorker({
        connection: env.nativeConnection,
        namespace: 'default',
        taskQueue: 'q',
        activities: runtime.activities,
        fetchBatches: 0,
      }),
      {
        message: 'fetchBatches must be a whole number of at least 1 (got 0)',
      },
    );
  } finally {
    await runtime.close();
  }
});
