import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { createWorker } from '../../src/client/worker';
import { probeDecisionQuery, probeResultSignal, requestProbeSignal, statusQuery } from '../../src/messages/breaker';
import { startEntity, waitForView, type EntityHandle } from '../helpers/entity';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

/*
 * A probe grant is read by its requester after the signal that asked for it: it must still be there however
 * many requests came after it, and after the entity continued as new (which carries the newest 16 decisions).
 */

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('probe-grants');

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
  worker?.shutdown();
  await running;
  await env?.teardown();
});

async function decisionOf(h: EntityHandle, requestId: string) {
  for (let i = 0; i < 100; i++) {
    const d = await h.query(probeDecisionQuery, requestId);
    if (d) return d;
    await delay(100);
  }
  return null;
}

test('a grant older than the newest decisions is still answered after continue-as-new, and its result counts', async () => {
  const key = `http://grants-${process.pid}-${Date.now()}.example.test:80`;
  const h = await startEntity(
    env.client,
    taskQueue,
    // A lease long enough to outlast the test, no self-probe, and an early continue-as-new.
    {
      key,
      config: { cooldownMs: 1_000, cooldownJitter: 0, probeLeaseMs: 600_000, probesToClose: 2 },
      options: { maxHistoryEvents: 60, selfProbeDelayMs: 3_600_000, searchAttributes: false },
    },
    { reporter: 'w1', counts: { transient: 25 } },
  );
  await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 250, maxSteps: 200 });
  await h.signal(requestProbeSignal, { requestId: 'grant-1', requester: 'w1' });
  const granted = await decisionOf(h, 'grant-1');
  assert.equal(granted?.kind, 'granted');
  const generation = granted.token.generation;

  // Forty more requests while the token is out (all denied: busy), enough for the run to continue as new.
  for (let i = 0; i < 40; i++) await h.signal(requestProbeSignal, { requestId: `ask-${i}`, requester: `w${i + 2}` });
  let status = await h.query(statusQuery);
  for (let i = 0; i < 100 && status.counters.continuedAsNew < 1; i++) {
    await delay(100);
    status = await h.query(statusQuery);
  }
  assert.ok(status.counters.continuedAsNew >= 1, `continued as new: ${JSON.stringify(status.counters)}`);
  assert.equal((await h.query(probeDecisionQuery, 'ask-39'))?.kind, 'denied');

  // The requester reads its grant in the new run, and its result is applied.
  const again = await h.query(probeDecisionQuery, 'grant-1');
  assert.deepEqual(again, granted);
  await h.signal(probeResultSignal, { generation, outcome: 'success', latencyMs: 20, reporter: 'w1' });
  const after = await h.query(statusQuery);
  assert.equal(after.probeSuccesses, 1, 'the result of the carried grant counted');
  assert.equal(after.counters.ignoredResults, 0);
});
