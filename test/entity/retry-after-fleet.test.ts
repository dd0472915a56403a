import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { BreakerGuard } from '../../src/activities/guard';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { breakerKey, breakerWorkflowId, type PolicyConfigInput } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery, transitionsQuery } from '../../src/messages/breaker';
import { parseSource } from '../../src/sources/schema';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWaitAskingServer, whenPausePublished } from '../helpers/wait-asking-server';

/** The guards' view cache (cacheTtlMs): a worker sees what the entity published at its next read. */
const VIEW_TTL_MS = 250;
/** What the test allows the entity to publish the pause in (a loaded machine's signal and workflow task included). */
const FLEET_HEARS_WITHIN_MS = 1_500;
/** A request already sent when its worker received the 503 (the answer and the next request cross on the wire). */
const IN_FLIGHT_MS = 50;

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('retry-after-fleet');
const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-503-'));

before(async () => {
  env = await devServerEnv();
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  running = worker.run();
});
after(async () => {
  worker.shutdown();
  await running;
  await env.teardown();
  rmSync(root, { recursive: true, force: true });
});

/** Two workers, each with its own guard and pools, fetching from `url` (header x-worker names them). */
function fleet(url: string, config: PolicyConfigInput = {}) {
  const workers = ['w1', 'w2'].map((name) => {
    const guard = new BreakerGuard({
      client: env.client,
      taskQueue,
      reporter: name,
      cacheTtlMs: VIEW_TTL_MS,
      entityOptions: { searchAttributes: false },
      config,
    });
    const pools = new EndpointPools();
    return { name, guard, pools, fetch: makeFetchBatch({ pools, guard }) };
  });
  const fetch = (k: number, y: number, n: number) =>
    workers[k]!.fetch({
      sourceName: workers[k]!.name,
      source: parseSource({
        type: 'xyz',
        url: `${url}/tiles/{z}/{x}/{y}.png`,
        concurrency: 3,
        headers: { 'x-worker': workers[k]!.name },
        timeouts: { connectMs: 1_000, headersMs: 2_000, bodyMs: 2_000, totalMs: 5_000 },
      }),
      tiles: Array.from({ length: n }, (_, i) => ({ z: 6, x: i, y })),
      storeRoot: root,
      retry: { attempts: 4, baseMs: 10, capMs: 50 },
    });
  const close = async () => {
    for (const w of workers) {
      await w.guard.close();
      await w.pools.close();
    }
  };
  return { workers, fetch, close };
}

test("a 503's Retry-After under a closed breaker pauses the whole fleet at once: no worker sends until it has passed, and the failures count", async () => {
  const RETRY_AFTER_MS = 2_000;
  const server = await startWaitAskingServer({
    from: 40,
    forMs: 1_000,
    status: 503,
    retryAfterS: RETRY_AFTER_MS / 1000,
  });
  const { workers, fetch, close } = fleet(server.url);
  const handle = env.client.workflow.getHandle(breakerWorkflowId(breakerKey(server.url)));
  try {
    // w1 fetches on; w2, which gets no 503 of its own, fetches once the entity has published the pause.
    const late = (async () => {
      const early = await fetch(1, 0, 5);
      const first = await server.first;
      const heardAt = await whenPausePublished(handle, first.answeredAt + RETRY_AFTER_MS);
      const startedAt = Date.now();
      return { early, later: heardAt ? await fetch(1, 1, 30) : [], startedAt, heardAt };
    })();
    const [w1, w2] = await Promise.all([fetch(0, 2, 60), late]);
    const first = await server.first;
    const { hits } = server;
    const unavailable = hits.filter((h) => h.status === 503);
    console.log(
      `503 pause: ${hits.length} requests, ${unavailable.length} answered 503; the entity published the pause ${w2.heardAt - first.answeredAt} ms after the first`,
    );
    assert.ok(
      w2.heardAt > 0 && w2.heardAt - first.answeredAt <= FLEET_HEARS_WITHIN_MS,
      `the entity published the pause ${w2.heardAt - first.answeredAt} ms after the first 503`,
    );
    // The worker that got it sends nothing more until its Retry-After has passed (requests already in flight aside) ...
    for (const r of unavailable) {
      const own = hits.filter(
        (h) => h.worker === r.worker && h.at >= r.answeredAt + IN_FLIGHT_MS && h.at < r.answeredAt + RETRY_AFTER_MS,
      );
      assert.deepEqual(own, [], `${r.worker} sent before the Retry-After of its 503 at ${r.answeredAt} ended`);
    }
    // ... and no worker does once the entity has published it and every cached view has turned over.
    const fleetEarly = hits.filter((h) => h.at >= w2.heardAt + VIEW_TTL_MS && h.at < first.answeredAt + RETRY_AFTER_MS);
    assert.deepEqual(fleetEarly, [], 'requests sent after the fleet heard of the pause and before it ended');
    assert.deepEqual(
      hits.filter((h) => h.worker === 'w2' && h.status === 503),
      [],
      'w2 got no 503 (else it would have paused on its own)',
    );
    assert.ok(workers[1]!.guard.stats.paced >= 1, 'w2 waited out the pause');
    for (const [k, rs] of [w1, [...w2.early, ...w2.later]].entries()) {
      assert.deepEqual(
        rs.filter((r) => r.status !== 'ok').map((r) => `${r.x}/${r.y}: ${r.status} ${r.reason}`),
        [],
        `${workers[k]!.name}: every tile fetched`,
      );
    }
    for (const w of workers) await w.guard.flush();
    const status = await handle.query(statusQuery);
    assert.equal(status.figures.failures, unavailable.length, 'each 503 counted as the failure it is');
  } finally {
    await close();
    await server.close();
  }
});

test('a 503 with Retry-After that goes on opens the breaker after the pauses, and no request leaves once it has', async () => {
  // 503s with Retry-After 1 s for 6 s: each pause ends in retries that fail again, until the fast window trips.
  const server = await startWaitAskingServer({ from: 30, forMs: 6_000, status: 503, retryAfterS: 1 });
  const { fetch, close } = fleet(server.url, { minSamples: 6, quorum: 1, cooldownMs: 10_000 });
  const handle = env.client.workflow.getHandle(breakerWorkflowId(breakerKey(server.url)));
  try {
    const results = await Promise.all([fetch(0, 3, 60), fetch(1, 4, 60)]);
    const transitions = (await handle.query(transitionsQuery)).slice().reverse();
    const open = transitions.find((t) => t.from === 'closed' && t.to === 'open');
    assert.ok(open, `the breaker opened: ${JSON.stringify(transitions.map((t) => `${t.from}->${t.to}`))}`);
    // A decision reads the entity afresh once a pause ends, so nothing goes out on a view from before the open.
    const halfOpen = transitions.find((t) => t.at > open.at && t.to === 'half-open')?.at ?? Infinity;
    const late = server.hits.filter((h) => h.at > open.at + VIEW_TTL_MS && h.at < halfOpen);
    console.log(
      `503 pause: opened ${open.at - (await server.first).answeredAt} ms after the first 503 (${open.detail}); ${server.hits.filter((h) => h.at > open.at).length} requests after it`,
    );
    assert.deepEqual(
      late.map((h) => `${h.worker} +${h.at - open.at} ms`),
      [],
      'requests after the open',
    );
    // Every tile is accounted for: fetched before, failed by its 503s, or refused by the open breaker.
    for (const rs of results) assert.equal(rs.length, 60);
  } finally {
    await close();
    await server.close();
  }
});
