import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { BreakerGuard } from '../../src/activities/guard';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery, transitionsQuery } from '../../src/messages/breaker';
import { parseSource } from '../../src/sources/schema';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWaitAskingServer, whenPausePublished } from '../helpers/wait-asking-server';

/** Requests before the server starts limiting, how long it answers every request 429, and its Retry-After. */
const LIMIT_FROM_REQUEST = 40;
const LIMITED_MS = 1_000;
const RETRY_AFTER_MS = 2_000;
/**
 * The guards' view cache (cacheTtlMs). Another worker learns of the pause from the entity: the report goes
 * after failureFlushMs (50 ms), the entity publishes it in a workflow task, and the worker sees it at its next
 * view read, at most cacheTtlMs later.
 */
const VIEW_TTL_MS = 250;
/** What the test allows the entity to publish the pause in (a loaded machine's signal and workflow task included). */
const FLEET_HEARS_WITHIN_MS = 1_500;
/** A request already sent when its worker received the 429 (the answer and the next request cross on the wire). */
const IN_FLIGHT_MS = 50;

test("a 429's Retry-After pauses the whole fleet (two workers) without opening the breaker, and the fetch completes", async () => {
  const env = await devServerEnv();
  const taskQueue = uniqueTaskQueue('rate-limited-fleet');
  const worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  const running = worker.run();
  const server = await startWaitAskingServer({
    from: LIMIT_FROM_REQUEST,
    forMs: LIMITED_MS,
    status: 429,
    retryAfterS: RETRY_AFTER_MS / 1000,
  });
  const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-429-'));
  const workers = ['w1', 'w2'].map((name) => {
    const guard = new BreakerGuard({
      client: env.client,
      taskQueue,
      reporter: name,
      cacheTtlMs: VIEW_TTL_MS,
      entityOptions: { searchAttributes: false },
    });
    const pools = new EndpointPools();
    return { name, guard, pools, fetch: makeFetchBatch({ pools, guard }) };
  });
  try {
    const source = (name: string) =>
      parseSource({
        type: 'xyz',
        url: `${server.url}/tiles/{z}/{x}/{y}.png`,
        concurrency: 3,
        headers: { 'x-worker': name },
        timeouts: { connectMs: 1_000, headersMs: 2_000, bodyMs: 2_000, totalMs: 5_000 },
      });
    const fetch = (k: number, y: number, n: number) =>
      workers[k]!.fetch({
        sourceName: workers[k]!.name,
        source: source(workers[k]!.name),
        tiles: Array.from({ length: n }, (_, i) => ({ z: 6, x: i, y })),
        storeRoot: root,
        retry: { attempts: 4, baseMs: 10, capMs: 50 },
      });
    // w1 fetches on; w2 fetches a few tiles (done before the server starts limiting), then, once the entity has
    // heard of w1's first 429, more: it has had no 429 of its own, so only the entity can tell it to wait.
    const handle = env.client.workflow.getHandle(breakerWorkflowId(breakerKey(server.url)));
    const late = (async () => {
      const early = await fetch(1, 0, 5);
      const firstAt = (await server.first).answeredAt;
      const heardAt = await whenPausePublished(handle, firstAt + RETRY_AFTER_MS);
      const startedAt = Date.now();
      return { early, later: heardAt ? await fetch(1, 1, 30) : [], startedAt, heardAt };
    })();
    const [w1, w2] = await Promise.all([fetch(0, 2, 60), late]);
    const results = [w1, [...w2.early, ...w2.later]];
    const { hits } = server;
    const limited = hits.filter((h) => h.status === 429);
    const first = limited[0];
    assert.ok(first, 'the server answered 429');
    // How long after the first 429 each other request still arrived before its Retry-After had elapsed.
    const early = hits
      .filter((h) => h.at > first.answeredAt && h.at < first.answeredAt + RETRY_AFTER_MS)
      .map((h) => `${h.worker}+${h.at - first.answeredAt}ms`);
    console.log(
      `429 pacing: ${hits.length} requests, ${limited.length} answered 429 (w1 ${limited.filter((h) => h.worker === 'w1').length}, w2 ${limited.filter((h) => h.worker === 'w2').length}); ` +
        `before the first one's Retry-After ended: ${early.join(', ') || 'none'}; paced calls w1 ${workers[0]!.guard.stats.paced}, w2 ${workers[1]!.guard.stats.paced}`,
    );
    console.log(`429 pacing: the entity published the pause ${w2.heardAt - first.answeredAt} ms after the first 429`);
    assert.ok(
      w2.heardAt > 0 && w2.heardAt - first.answeredAt <= FLEET_HEARS_WITHIN_MS,
      `the entity published the pause ${w2.heardAt - first.answeredAt} ms after the first 429`,
    );
    for (const r of limited) {
      const end = r.answeredAt + RETRY_AFTER_MS;
      // The worker that got it sends nothing more until its Retry-After has elapsed (requests already in flight aside) ...
      const own = hits.filter((h) => h.worker === r.worker && h.at >= r.answeredAt + IN_FLIGHT_MS && h.at < end);
      assert.deepEqual(own, [], `${r.worker} sent before the Retry-After of its 429 at ${r.answeredAt} ended`);
    }
    // ... and no worker does once the entity has published it and every guard's cached view has turned over.
    const pauseEnd = first.answeredAt + RETRY_AFTER_MS;
    const fleet = hits.filter((h) => h.at >= w2.heardAt + VIEW_TTL_MS && h.at < pauseEnd);
    assert.deepEqual(fleet, [], `requests sent after the fleet heard of the pause and before it ended`);
    // The worker that had no 429 of its own heard of the pause from the entity, and waited it out.
    const w2Later = hits.filter((h) => h.worker === 'w2' && h.at >= w2.startedAt);
    assert.deepEqual(
      hits.filter((h) => h.worker === 'w2' && h.status === 429),
      [],
      'w2 got no 429 (else it would have paused on its own)',
    );
    assert.ok(
      w2Later.length > 0 && w2Later.every((h) => h.at >= first.answeredAt + RETRY_AFTER_MS),
      `w2 sent before the fleet's pause ended: ${w2Later.map((h) => h.at - first.answeredAt).join(', ')} ms after the first 429`,
    );
    assert.ok(workers[1]!.guard.stats.paced >= 1, 'w2 waited out the pause');
    // Then both resume, and every tile is fetched.
    const last = Math.max(...limited.map((h) => h.answeredAt + RETRY_AFTER_MS));
    for (const w of workers)
      assert.ok(
        hits.some((h) => h.worker === w.name && h.at >= last && h.status === 200),
        `${w.name} resumed after the pause`,
      );
    for (const [k, rs] of results.entries()) {
      assert.deepEqual(
        rs.filter((r) => r.status !== 'ok').map((r) => `${r.x}/${r.y}: ${r.status} ${r.reason}`),
        [],
        `${workers[k]!.name}: every tile fetched`,
      );
    }
    // The breaker never opened, and counted no 429 as a failure.
    for (const w of workers) await w.guard.flush();
    const status = await handle.query(statusQuery);
    assert.equal(status.view.state, 'closed');
    assert.deepEqual(await handle.query(transitionsQuery), []);
    assert.equal(status.figures.failures, 0);
    assert.equal(status.figures.rateLimited, limited.length);
  } finally {
    for (const w of workers) {
      await w.guard.close();
      await w.pools.close();
    }
    await server.close();
    rmSync(root, { recursive: true, force: true });
    worker.shutdown();
    await running;
    await env.teardown();
  }
});
