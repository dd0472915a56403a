import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { request } from 'undici';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { breakerStatus } from '../../src/client/breakers';
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
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
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
async function simulatedWorker(
  reporter: string,
  rate: number,
  key: string,
  url: string,
  inFlight: number,
  started: number,
  endAt: number | (() => number),
  onCall: (at: number) => void,
): Promise<void> {
  const end = typeof endAt === 'number' ? () => endAt : endAt;
  const guard = new BreakerGuard({
    client: env.client,
    taskQueue,
    reporter,
    config: { maxRequestsPerSecond: rate },
    entityOptions: { searchAttributes: false },
  });
  guards.push(guard);
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < end()) {
        const d = await guard.acquire(key);
        if (d.kind === 'refused') continue;
        if (Date.now() >= end()) {
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
  /** How long the run goes on once the entity counts all three workers. */
  const STEADY_MS = 5_000;
  const key = breakerKey(endpoint.url);
  const times: number[] = [];
  const perWorker = [0, 0, 0];
  const started = Date.now();
  // The share follows the entity's count of the workers: until it counts three, each may take the whole rate.
  // When that happens is the machine's business (a loaded one is slower), so the run follows the count.
  let joinedAt = null as number | null;
  let endAt = started + 120_000;
  const watching = (async () => {
    while (joinedAt === null && Date.now() < endAt) {
      const n = await breakerStatus(env.client, key)
        .then((s) => s.view.activeReporters ?? 0)
        .catch(() => 0);
      if (n >= 3) {
        joinedAt = Date.now() - started;
        endAt = Date.now() + STEADY_MS;
      } else await delay(100);
    }
  })();
  // Three processes' worth of guards (each its own reporter), eight requests in flight each, as fast as allowed.
  await Promise.all(
    [0, 1, 2].map((w) =>
      simulatedWorker(
        `worker-${w}`,
        RATE,
        key,
        `${endpoint.url}/0/0/0.png`,
        8,
        started,
        () => endAt,
        (at) => {
          times.push(at);
          perWorker[w]!++;
        },
      ),
    ),
  );
  await watching;
  assert.ok(joinedAt !== null, 'the entity counted the three workers');
  const runMs = endAt - started;
  // Views are cached for a second: from one second after the count, the share holds (+10 %).
  const from = joinedAt + 1_000;
  const steady = times.filter((t) => t >= from && t < runMs).length / ((runMs - from) / 1_000);
  const before = times.filter((t) => t < from).length;
  const total = times.length;
  console.log(
    `pacing: ${total} requests in ${(runMs / 1000).toFixed(1)} s, the three counted after ${joinedAt} ms (steady ${steady.toFixed(1)}/s for a limit of ${RATE}/s), per worker ${perWorker.join(' / ')}`,
  );
  assert.ok(steady <= RATE * 1.1, `steady rate ${steady.toFixed(1)}/s over the limit ${RATE}/s`);
  assert.ok(steady >= RATE * 0.6, `steady rate ${steady.toFixed(1)}/s: the limit is used, not starved`);
  // Before the count, no worker takes more than the whole rate (plus the second its first view may be late).
  assert.ok(
    before <= 3 * RATE * (from / 1000 + 1),
    `${before} requests in the ${from} ms before every worker was counted, for a limit of ${RATE}/s`,
  );
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
    await Promise.all(
      Array.from({ length: WORKERS }, (_, w) =>
        simulatedWorker(`slow-${w}`, RATE, key, `${other.url}/0/0/0.png`, 1, started, started + RUN_MS, () => total++),
      ),
    );
    console.log(
      `pacing (small shares): ${total} requests in ${RUN_MS / 1000} s for a limit of ${RATE}/s across ${WORKERS} workers`,
    );
    // One call per six seconds each, the first at a random moment of the first six: 15 on average.
    assert.ok(total <= RATE * (RUN_MS / 1000) + 3, `total ${total}`);
  } finally {
    await other.close();
  }
});
