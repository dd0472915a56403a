import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { startMosaic } from '../../src/client/mosaics';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest, tileBoxRequest } from '../helpers/mosaic';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-fleet-'));
let env: TestWorkflowEnvironment;
const cleanups: (() => Promise<void> | void)[] = [];
before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
});
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

function worker(taskQueue: string): WorkerProcess {
  const w = startWorkerProcess(env.address, env.namespace ?? 'default', taskQueue);
  cleanups.push(async () => {
    w.child.kill('SIGKILL');
    await w.exited;
  });
  return w;
}

/** A `cols` x `rows` block of zoom-12 tiles (one per request) from the demo tile server `s`. */
function request(
  s: DemoTileServer,
  name: string,
  cols: number,
  rows: number,
  extra: Partial<MosaicRequest>,
): MosaicRequest {
  return tileBoxRequest(s, dir, name, { cols, rows }, extra);
}

/** Fetch batches per worker identity, read from the history (ACTIVITY_TASK_STARTED names the worker). */
async function batchesByWorker(workflowId: string): Promise<Map<string, number>> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const types = new Map<string, string>();
  const counts = new Map<string, number>();
  for (const e of events) {
    if (e.activityTaskScheduledEventAttributes)
      types.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
    const st = e.activityTaskStartedEventAttributes;
    if (st && types.get(String(st.scheduledEventId)) === 'fetchMosaicBatch')
      counts.set(st.identity ?? '?', (counts.get(st.identity ?? '?') ?? 0) + 1);
  }
  return counts;
}

test("one mosaic's fetch batches spread over the fleet: two worker processes each run a fair share", async () => {
  const server = await startDemoTileServer({ latencyMs: 50 });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('fleet-spread');
  const fleet = [worker(taskQueue), worker(taskQueue)];
  await Promise.all(fleet.map((w) => w.ready));
  await delay(500);
  // 256 tiles in 32 batches of 8, 4 in flight. With eager dispatch the worker that completed the workflow task
  // took nearly every batch (29 of 32 with three workers in bench:throughput).
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(server, 'spread', 16, 16, { batchSize: 8, parallelBatches: 4 }),
    `fleet-spread-${process.pid}`,
  );
  const result = await handle.result();
  assert.equal(result.counts.ok, 256);
  const counts = await batchesByWorker(handle.workflowId);
  const per = fleet.map((w) =>
    [...counts.entries()].filter(([who]) => who.startsWith(w.identityPrefix)).reduce((a, [, k]) => a + k, 0),
  );
  console.log(
    `spread: fetch batches per worker ${per.join(' / ')} (${[...counts.entries()].map(([who, k]) => `${who} ${k}`).join(', ')})`,
  );
  assert.equal(
    per.reduce((a, b) => a + b, 0),
    32,
    'every batch ran on one of the two workers',
  );
  assert.ok(Math.max(...per) <= 24, `the busiest worker ran ${Math.max(...per)} of 32 batches (at most 24 expected)`);
});

test('a worker SIGKILLed mid-batch: another worker finishes the batch, and only the tiles of its last ~2 s are fetched twice', async () => {
  // When each tile went out, by path: a tile fetched twice was finished before the kill and lost.
  const servedAt = new Map<string, number[]>();
  const server = await startDemoTileServer({
    latencyMs: 100,
    onServed: (p) => servedAt.set(p, [...(servedAt.get(p) ?? []), Date.now()]),
  });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('fleet-kill');
  const fleet = [worker(taskQueue), worker(taskQueue)];
  await Promise.all(fleet.map((w) => w.ready));
  // One batch of 400 tiles at 2 requests in flight, 100 ms each: about 20 s of fetching.
  const req = request(server, 'kill', 20, 20, { batchSize: 400, parallelBatches: 1 });
  const handle = await startMosaic(env.client, taskQueue, req, `fleet-kill-${process.pid}`);
  // Well into the batch (8 s of finished tiles: a heartbeat throttled to 0.8 x the 20 s timeout lost them all).
  for (let i = 0; i < 600 && server.stats.ok < 160; i++) await delay(50);
  assert.ok(server.stats.ok >= 160, `the batch got going (${server.stats.ok} tiles served)`);
  // The worker running the batch, as Temporal knows it.
  const running = (await handle.describe()).raw.pendingActivities?.[0]?.lastWorkerIdentity ?? '';
  const victim = fleet.find((w) => running.startsWith(w.identityPrefix));
  assert.ok(victim, `the batch runs on one of the fleet's workers (${running})`);
  const survivor = fleet.find((w) => w !== victim)!;
  const killedAt = Date.now();
  victim.child.kill('SIGKILL');
  await victim.exited;
  const atKill = server.stats.ok;

  const result = await handle.result();
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.equal(m.counts.ok, 400, JSON.stringify(m.counts));
  const twice = [...servedAt.entries()].filter(([, at]) => at.length > 1);
  const oldest = Math.min(...twice.map(([, at]) => at[0]!));
  const lostMs = twice.length ? killedAt - oldest : 0;
  const who = await batchesByWorker(handle.workflowId);
  console.log(
    `kill: ${atKill} tiles served at the kill, ${twice.length} fetched twice, first served from ${lostMs} ms before the kill; batch finished by ${[...who.keys()].join(', ')}`,
  );
  assert.ok(
    [...who.keys()].every((id) => id.startsWith(survivor.identityPrefix)),
    'the surviving worker finished the batch',
  );
  // Heartbeats leave the worker at most every 1.5 s, each with the tiles finished up to 0.5 s before: at most
  // 2 s of finished tiles are lost (plus a second's slack for a loaded machine's late heartbeat).
  assert.ok(lostMs <= 3_000, `tiles finished ${lostMs} ms before the kill were fetched again (${twice.length} tiles)`);
  assert.ok(twice.length <= 3 * 20, `${twice.length} tiles fetched twice (20 tiles/s: at most ~60 expected)`);
});
