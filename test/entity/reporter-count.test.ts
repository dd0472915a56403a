import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId, type BreakerView } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

// The entity publishes how many workers report to it (rounded up to a power of two) in the view its memo
// carries: guards space their reports by it (report-spacing.ts).

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('reporter-count');
const guards: BreakerGuard[] = [];

before(async () => {
  env = await timeSkippingEnv();
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  running = worker.run();
});
after(async () => {
  await Promise.all(guards.map((g) => g.close()));
  worker?.shutdown();
  await running;
  await env?.teardown();
});

test('three workers reporting to one key are published as four reporters in the memo', async () => {
  const key = breakerKey(`http://tiles-${process.pid}-count.example.test`);
  for (const reporter of ['w1', 'w2', 'w3']) {
    const g = new BreakerGuard({ client: env.client, taskQueue, reporter, entityOptions: { searchAttributes: false } });
    guards.push(g);
    const d = await g.acquire(key);
    assert.equal(d.kind, 'proceed');
    g.release(d, { kind: 'success', latencyMs: 20 });
    await g.flush();
  }
  const handle = env.client.workflow.getHandle(breakerWorkflowId(key));
  let view: BreakerView | undefined;
  for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    view = (await handle.describe()).memo?.['view'] as BreakerView | undefined;
    if (view?.reporters === 4) break;
  }
  assert.equal(view?.reporters, 4);
  assert.equal(view?.state, 'closed');
});
