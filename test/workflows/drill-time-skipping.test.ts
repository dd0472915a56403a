import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { breakerDrillWorkflow } from '../../src/workflows';
import { outageDrill } from '../scenarios/drill-outage';
import { timeSkippingEnv, uniqueTaskQueue, workflowsPath } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
before(async () => {
  env = await timeSkippingEnv();
});
after(async () => {
  await env?.teardown();
});

test('minutes of cooldown run on durable timers and are skipped by the time-skipping server', async () => {
  const taskQueue = uniqueTaskQueue('drill');
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowsPath });
  const wallStart = Date.now();
  const result = await worker.runUntil(
    env.client.workflow.execute(breakerDrillWorkflow, {
      args: [outageDrill()],
      workflowId: `drill-${taskQueue}`,
      taskQueue,
    }),
  );
  const wallMs = Date.now() - wallStart;

  const path = result.transitions.map((t) => `${t.from}>${t.to}:${t.reason}`);
  assert.deepEqual(path, [
    'closed>open:failure-ratio',
    'open>half-open:cooldown-elapsed',
    'half-open>open:probe-failed',
    'open>half-open:cooldown-elapsed',
    'half-open>closed:probes-succeeded',
  ]);
  const [trip, firstHalfOpen, reopen, secondHalfOpen] = result.transitions;
  // The cooldown timer fired exactly when the policy said, on workflow time.
  assert.equal(firstHalfOpen!.at - trip!.at, trip!.cooldownMs);
  assert.equal(secondHalfOpen!.at - reopen!.at, reopen!.cooldownMs);
  assert.ok(trip!.cooldownMs! >= 4 * 60_000 && trip!.cooldownMs! <= 6 * 60_000, `first cooldown ${trip!.cooldownMs}`);
  assert.ok(
    reopen!.cooldownMs! >= 8 * 60_000 && reopen!.cooldownMs! <= 12 * 60_000,
    `second cooldown ${reopen!.cooldownMs}`,
  );
  assert.equal(trip!.figures?.failures, 40);

  // Probes: denied while open, one granted, one busy, then granted with new generations.
  assert.deepEqual(
    result.decisions.map((d) =>
      d.kind === 'granted' ? `granted:${d.token.generation}` : d.kind === 'denied' ? `denied:${d.reason}` : d.kind,
    ),
    ['denied:open', 'granted:1', 'denied:busy', 'granted:2', 'granted:3'],
  );
  assert.equal(result.ignored.length, 1, 'the stale generation-1 success is ignored');
  assert.match(result.ignored[0]!.why, /generation 1/);
  assert.equal(result.finalState, 'closed');

  // Over 25 minutes of workflow time passed; the server skipped it rather than waiting.
  const workflowMs = result.transitions[result.transitions.length - 1]!.at - result.startedAt;
  assert.ok(workflowMs > 25 * 60_000, `workflow time ${workflowMs} ms`);
  assert.ok(wallMs < workflowMs / 10, `wall time ${wallMs} ms for ${workflowMs} ms of workflow time`);
});

test('a drill with a bad configuration fails at once, naming the field and the value', async () => {
  const taskQueue = uniqueTaskQueue('drill-bad');
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowsPath });
  const input = { ...outageDrill(), config: { failureRatio: 1.5 } };
  const err = await worker.runUntil(
    env.client.workflow
      .execute(breakerDrillWorkflow, { args: [input], workflowId: `drill-${taskQueue}`, taskQueue })
      .then(
        () => assert.fail('the drill should have failed'),
        (e: unknown) => e,
      ),
  );
  assert.ok(err instanceof WorkflowFailedError);
  assert.match(String(err.cause?.message), /failureRatio: .*\(got 1\.5\)/);
});
