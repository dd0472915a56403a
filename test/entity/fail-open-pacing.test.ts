import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

/** Calls through `guard` from `loops` concurrent loops for `ms` from the first fail-open decision: how many failed open. */
async function failOpenCalls(
  guard: BreakerGuard,
  key: string,
  loops: number,
  ms: number,
): Promise<{ calls: number; other: number }> {
  let first = 0;
  let calls = 0;
  let other = 0;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      for (;;) {
        const d = await guard.acquire(key);
        if (first && Date.now() - first >= ms) {
          guard.abandon(d);
          return;
        }
        if (d.kind === 'proceed' && d.failOpen) {
          first ||= Date.now();
          calls++;
        } else if (first) other++;
        guard.abandon(d);
        // Before the first fail-open (the cached view still answers), do not spin.
        if (!first) await new Promise((r) => setTimeout(r, 20));
      }
    }),
  );
  return { calls, other };
}

test("failing open keeps the rate limit: the last share the entity published for this worker, or with none known the guard's own rate", async () => {
  const RATE = 10;
  const RUN_MS = 3_000;
  const env = await devServerEnv();
  const taskQueue = uniqueTaskQueue('fail-open-pacing');
  const worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  const running = worker.run();
  const make = (reporter: string) =>
    new BreakerGuard({
      client: env.client,
      taskQueue,
      reporter,
      rpcTimeoutMs: 500,
      config: { maxRequestsPerSecond: RATE },
      entityOptions: { searchAttributes: false },
      logger: { warn: () => {} },
    });
  const [a, b] = [make('share-a'), make('share-b')];
  let late: BreakerGuard | null = null;
  const key = breakerKey(`http://paced-${process.pid}.example.test`);
  let stopped = false;
  try {
    // Two workers use the endpoint until the entity counts both: each one's share is half the rate.
    const use = async (g: BreakerGuard) => {
      while (!stopped) {
        const d = await g.acquire(key);
        g.release(d, { kind: 'success', latencyMs: 5 });
      }
    };
    const users = [use(a), use(b)];
    for (let i = 0; i < 100 && (await a.view(key))?.activeReporters !== 2; i++)
      await new Promise((r) => setTimeout(r, 100));
    stopped = true;
    await Promise.all(users);
    assert.equal((await a.view(key))?.activeReporters, 2, 'the entity counts both workers');

    // Temporal goes away (the worker, then the server): the entity cannot be reached.
    worker.shutdown();
    await running;
    await env.teardown();

    const kept = await failOpenCalls(a, key, 4, RUN_MS);
    const share = RATE / 2;
    console.log(
      `fail-open pacing: ${kept.calls} calls in ${RUN_MS} ms failing open at a share of ${share}/s (${kept.other} other decisions)`,
    );
    assert.equal(kept.other, 0, 'every call failed open');
    // The first slot falls within the first gap, so one more than the share allows over the run, and a little slack.
    assert.ok(
      kept.calls <= share * (RUN_MS / 1000) + 2,
      `${kept.calls} calls in ${RUN_MS} ms: the share of ${share}/s is not kept`,
    );
    assert.ok(kept.calls >= share * (RUN_MS / 1000) * 0.6, `${kept.calls} calls: the share is used, not starved`);

    // A guard that never heard from the entity knows no share: it keeps its own configured rate, whole.
    late = make('never-reached');
    const whole = await failOpenCalls(late, key, 4, RUN_MS);
    console.log(`fail-open pacing with no share known: ${whole.calls} calls in ${RUN_MS} ms (own rate ${RATE}/s)`);
    assert.ok(
      whole.calls <= RATE * (RUN_MS / 1000) + 2,
      `${whole.calls} calls in ${RUN_MS} ms: the own rate of ${RATE}/s is not kept`,
    );
    assert.ok(whole.calls >= RATE * (RUN_MS / 1000) * 0.6, `${whole.calls} calls: the rate is used, not starved`);
    assert.ok(a.stats.failOpen >= kept.calls && late.stats.failOpen >= whole.calls, 'each is counted as failing open');
  } finally {
    stopped = true;
    await Promise.all([a.close(), b.close(), late?.close()]);
  }
});
