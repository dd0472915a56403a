import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { breakerDrillWorkflow } from '../../src/workflows';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { devServerEnv, uniqueTaskQueue, workflowsPath } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
});
after(async () => {
  await env?.teardown();
});

test('the dev server runs a drill and lists it by the BreakerState search attribute', async () => {
  const taskQueue = uniqueTaskQueue('drill-dev');
  const key = `https://wms.example.test:443/${taskQueue}`;
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowsPath });
  const workflowId = `drill-${taskQueue}`;
  const result = await worker.runUntil(
    env.client.workflow.execute(breakerDrillWorkflow, {
      taskQueue,
      workflowId,
      args: [
        {
          key,
          upsertSearchAttributes: true,
          config: { minSamples: 5, cooldownMs: 500, cooldownJitter: 0, probeIntervalMs: null },
          steps: [
            { atMs: 0, event: { type: 'report', counts: { success: 2, 'service-exception': 8 } } },
            // A real 500 ms timer elapses on the dev server: open -> half-open, then a failed probe re-opens.
            { atMs: 800, event: { type: 'probe-request', requestId: 'r1', requester: 'w1' } },
            { atMs: 900, event: { type: 'probe-result', generation: 1, outcome: 'service-exception' } },
          ],
        },
      ],
    }),
  );
  assert.deepEqual(
    result.transitions.map((t) => `${t.from}>${t.to}`),
    ['closed>open', 'open>half-open', 'half-open>open'],
  );
  assert.equal(result.transitions[2]!.cooldownMs, 1000, 'the second open doubles the 500 ms cooldown');
  assert.equal(result.finalState, 'open');

  // Visibility is eventually consistent: poll briefly.
  const query = `BreakerState = "open" AND BreakerKey = "${key}"`;
  let found: string[] = [];
  for (let i = 0; i < 50 && found.length === 0; i++) {
    found = [];
    for await (const wf of env.client.workflow.list({ query })) found.push(wf.workflowId);
    if (found.length === 0) await delay(200);
  }
  assert.deepEqual(found, [workflowId]);
  let closedMatches = 0;
  for await (const _ of env.client.workflow.list({ query: `BreakerState = "closed" AND BreakerKey = "${key}"` }))
    closedMatches++;
  assert.equal(closedMatches, 0);
});
