import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { servedFetchQueue } from '../../src/activities/mosaic/fetch-queue';
import { startMosaic, startRedrive } from '../../src/client/mosaics';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest, tileBoxRequest } from '../helpers/mosaic';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

// The per-worker cap on fetch batches (`tilebreaker worker --fetch-batches`, TILEBREAKER_FETCH_BATCHES), with
// real worker processes; what each worker ran, and when, is read back from the histories.

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-fetch-cap-'));
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

function worker(taskQueue: string, fetchBatches: number): WorkerProcess {
  const w = startWorkerProcess(env.address, env.namespace ?? 'default', taskQueue, {
    TILEBREAKER_FETCH_BATCHES: String(fetchBatches),
  });
  cleanups.push(async () => {
    w.child.kill('SIGKILL');
    await w.exited;
  });
  return w;
}

/** A `cols` x `rows` block of zoom-12 tiles (one per request) from the demo tile server `s`, from column `x0`. */
function request(
  s: DemoTileServer,
  name: string,
  cols: number,
  rows: number,
  extra: Partial<MosaicRequest>,
  x0 = 2100,
): MosaicRequest {
  return tileBoxRequest(s, dir, name, { cols, rows, x0 }, extra);
}

/** One activity attempt as the history has it: its type, the worker that ran it, when it started and ended. */
interface Run {
  type: string;
  identity: string;
  start: number;
  end: number;
}

const ms = (
  t: { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined,
): number =>
  t ? (typeof t.seconds === 'number' ? t.seconds : (t.seconds?.toNumber() ?? 0)) * 1_000 + (t.nanos ?? 0) / 1e6 : NaN;

/** The activities of a workflow that started and completed, from ACTIVITY_TASK_STARTED/COMPLETED. */
async function runs(workflowId: string): Promise<Run[]> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const types = new Map<string, string>();
  const started = new Map<string, { identity: string; start: number }>();
  const out: Run[] = [];
  for (const e of events) {
    const id = String(e.eventId);
    if (e.activityTaskScheduledEventAttributes)
      types.set(id, e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
    const st = e.activityTaskStartedEventAttributes;
    if (st) started.set(id, { identity: st.identity ?? '?', start: ms(e.eventTime) });
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const s = started.get(String(done.startedEventId))!;
      out.push({
        type: types.get(String(done.scheduledEventId)) ?? '?',
        identity: s.identity,
        start: s.start,
        end: ms(e.eventTime),
      });
    }
  }
  return out;
}

/** The most of `rs` running at once (one that ends at the instant another starts does not overlap it). */
function peak(rs: Run[]): number {
  const edges = rs.flatMap((r) => [
    { at: r.start, d: 1 },
    { at: r.end, d: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (now += e.d));
  return most;
}

/** Until the server lists a poller of the fetch queue: only then do plans send batches there. */
async function untilFetchQueueServed(taskQueue: string): Promise<void> {
  for (let i = 0; i < 200 && !(await servedFetchQueue(env.client, taskQueue, 60_000)); i++) await delay(50);
  assert.ok(await servedFetchQueue(env.client, taskQueue, 60_000), `nobody polls ${taskQueue}-fetch`);
}

const fetches = (rs: Run[], w: WorkerProcess) =>
  rs.filter((r) => r.type === 'fetchMosaicBatch' && r.identity.startsWith(w.identityPrefix));

test('a worker never runs more fetch batches at once than its cap (1 on one worker, 2 on the other), however many the mosaic has in flight', async () => {
  const server = await startDemoTileServer({ latencyMs: 50 });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('fetch-cap');
  const [one, two] = [worker(taskQueue, 1), worker(taskQueue, 2)];
  await Promise.all([one.ready, two.ready]);
  await untilFetchQueueServed(taskQueue);
  // 256 tiles in 32 batches of 8, 6 in flight: without the cap each worker held two to four at once.
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(server, 'cap', 16, 16, { batchSize: 8, parallelBatches: 6 }),
    `fetch-cap-${process.pid}`,
  );
  const result = await handle.result();
  assert.equal(result.counts.ok, 256);
  const rs = await runs(handle.workflowId);
  const [a, b] = [fetches(rs, one), fetches(rs, two)];
  console.log(
    `cap: batches ${a.length} (at most ${peak(a)} at once, cap 1) / ${b.length} (at most ${peak(b)} at once, cap 2)`,
  );
  assert.equal(a.length + b.length, 32, 'every batch ran on one of the two workers');
  assert.ok(peak(a) <= 1, `the worker capped at 1 ran ${peak(a)} batches at once`);
  assert.ok(peak(b) <= 2, `the worker capped at 2 ran ${peak(b)} batches at once`);
  // The cap binds (6 in flight against 3 slots): the second worker did run two at once.
  assert.equal(peak(b), 2, 'the worker capped at 2 ran two batches at once at some point');
});

test("a worker at its cap still plans and assembles: another mosaic's plan and a re-drive's assembly run while its one batch runs", async () => {
  const server = await startDemoTileServer({ latencyMs: 200 });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue('fetch-cap-others');
  const w = worker(taskQueue, 1);
  await w.ready;
  await untilFetchQueueServed(taskQueue);
  // A finished mosaic to re-drive (no dead letters: the re-drive only reads its journals and assembles).
  const done = await startMosaic(
    env.client,
    taskQueue,
    request(server, 'done', 2, 2, { batchSize: 16, parallelBatches: 1 }, 2200),
    `fetch-cap-done-${process.pid}`,
  );
  assert.equal((await done.result()).counts.ok, 4);
  // The long one: 144 tiles in 3 batches of 48 at 2 requests in flight, 200 ms each (about 5 s a batch), 2 in
  // flight: at cap 1 the worker always runs one batch and holds none back.
  const long = await startMosaic(
    env.client,
    taskQueue,
    request(server, 'long', 12, 12, { batchSize: 48, parallelBatches: 2 }),
    `fetch-cap-long-${process.pid}`,
  );
  for (let i = 0; i < 400 && server.stats.ok < 5; i++) await delay(25);
  assert.ok(server.stats.ok >= 5, 'the long mosaic is fetching');
  const small = await startMosaic(
    env.client,
    taskQueue,
    request(server, 'small', 2, 2, { batchSize: 16, parallelBatches: 1 }, 2300),
    `fetch-cap-small-${process.pid}`,
  );
  const redriveId = await startRedrive(env.client, taskQueue, path.join(dir, 'done', 'mosaic.tif'));
  const redrive = env.client.workflow.getHandle<() => Promise<MosaicResult>>(redriveId);
  const redone = readManifest(await redrive.result());
  assert.equal(assertAccounted(redone), null);
  assert.equal((await long.result()).counts.ok, 144);
  assert.equal((await small.result()).counts.ok, 4);

  const [longRuns, smallRuns, redriveRuns] = [
    await runs(long.workflowId),
    await runs(small.workflowId),
    await runs(redriveId),
  ];
  const all = [...longRuns, ...smallRuns, ...redriveRuns];
  assert.ok(peak(fetches(all, w)) <= 1, `the worker ran ${peak(fetches(all, w))} batches at once (cap 1)`);
  // Inside one batch's run (of either mosaic): the worker was at its cap of 1 throughout.
  const batches = fetches(all, w);
  const during = (r: Run) => batches.some((b) => b.start < r.start && r.end < b.end);
  const plan = smallRuns.find((r) => r.type === 'planMosaic');
  const letters = redriveRuns.find((r) => r.type === 'loadDeadLetters');
  const assembly = redriveRuns.find((r) => r.type === 'assembleMosaic');
  for (const [name, r] of [
    ['the small mosaic plan', plan],
    ['the re-drive reading its dead letters', letters],
    ['the re-drive assembly', assembly],
  ] as const) {
    assert.ok(r, `${name} ran`);
    assert.ok(
      during(r),
      `${name} ran while the worker ran its one batch (${r.start}-${r.end}; batches ${batches.map((b) => `${b.start}-${b.end}`).join(', ')})`,
    );
  }
});
