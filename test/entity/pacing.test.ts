import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { request } from 'undici';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startTestEndpoint, type TestEndpoint } from '../helpers/tile-server';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let endpoint: TestEndpoint;
const taskQueue = uniqueTaskQueue('pacing');
const guards: BreakerGuard[] = [];

before(async () => {
  env = await devServerEnv();
  worker = await createWorker({ connection: env.nativeConnection, client: env.client, namespace: 'default', taskQueue });
  running = worker.run();
  endpoint = await startTestEndpoint(200);
});
after(async () => {
  for (const g of guards) await g.close();
  worker?.shutdown();
  await running;
  await env?.teardown();
  await endpoint?.close();
});

/**
 * One simulated worker: its own guard (its own reporter) and `inFlight` loops calling `url` through it as fast
 * as the guard allows until `endAt`; `onCall(msSinceStart)` for every request made.
 */
async function simulatedWorker(reporter: string, rate: number, key: string, url: string, inFlight: number, started: number, endAt: number, onCall: (at: number) => void): Promise<void> {
  const guard = new BreakerGuard({ client: env.client, taskQueue, reporter, config: { maxRequestsPerSecond: rate }, entityOptions: { searchAttributes: false } });
  guards.push(guard);
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < endAt) {
        const d = await guard.acquire(key);
        if (d.kind === 'refused') continue;
        if (Date.now() >= endAt) {
          guard.abandon(d);
          return;
        }
        const t0 = Date.now();
        const res = await request(url);
        await res.body.arrayBuffer();
        onCall(t0 - started);
        guard.release(d, { kind: 'success', latencyMs: Date.now() - t0 });
      }
    }),
  );
}

test("three workers together stay under the endpoint's fleet-wide rate limit, each getting a share", async () => {
  const RATE = 20;
  const RUN_MS = 6_000;
  const key = breakerKey(endpoint.url);
  const times: number[] = [];
  const perWorker = [0, 0, 0];
  const started = Date.now();
  // Three processes' worth of guards (each its own reporter), eight requests in flight each, as fast as allowed.
  await Promise.all(
    [0, 1, 2].map((w) =>
      simulatedWorker(`worker-${w}`, RATE, key, `${endpoint.url}/0/0/0.png`, 8, started, started + RUN_MS, (at) => {
        times.push(at);
        perWorker[w]!++;
      }),
    ),
  );
  // Steady state, once every worker has reported and the entity counts three: at most the rate (+10 %).
  const steady = times.filter((t) => t >= 2_000 && t < RUN_MS).length / ((RUN_MS - 2_000) / 1_000);
  // Including the start: workers join the entity's count before their first call; workers starting in the
  // same instant can still see each other late (views are cached for a second), so the whole run may exceed
  // the limit by at most about one second of it.
  const total = times.length;
  console.log(`pacing: ${total} requests in ${RUN_MS / 1000} s (steady ${steady.toFixed(1)}/s for a limit of ${RATE}/s), per worker ${perWorker.join(' / ')}`);
  assert.ok(steady <= RATE * 1.1, `steady rate ${steady.toFixed(1)}/s over the limit ${RATE}/s`);
  assert.ok(steady >= RATE * 0.6, `steady rate ${steady.toFixed(1)}/s: the limit is used, not starved`);
  assert.ok(total <= RATE * (RUN_MS / 1000 + 1), `total ${total} in ${RUN_MS} ms for a limit of ${RATE}/s`);
  assert.ok(
    perWorker.every((n) => n >= total / 6),
    `every worker gets a share: ${perWorker.join(', ')}`,
  );
});

test('a share smaller than one call per five seconds stays counted (keepalive reports), so the others do not take more', async () => {
  const RATE = 1;
  const WORKERS = 6;
  const RUN_MS = 15_000;
  const other = await startTestEndpoint(200);
  try {
    const key = breakerKey(other.url);
    let total = 0;
    const started = Date.now();
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => simulatedWorker(`slow-${w}`, RATE, key, `${other.url}/0/0/0.png`, 1, started, started + RUN_MS, () => total++)));
    console.log(`pacing (small shares): ${total} requests in ${RUN_MS / 1000} s for a limit of ${RATE}/s across ${WORKERS} workers`);
    // One call per six seconds each, the first at a random moment of the first six: 15 on average.
    assert.ok(total <= RATE * (RUN_MS / 1000) + 3, `total ${total}`);
  } finally {
    await other.close();
  }
});
