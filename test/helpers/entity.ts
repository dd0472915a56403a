import type { Client, WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { setTimeout as delay } from 'node:timers/promises';
import { breakerWorkflowId, type BreakerView } from '../../src/breaker';
import { breakerEntityWorkflow } from '../../src/workflows/breaker-entity';
import {
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  viewQuery,
  type EntityInput,
  type OutcomeReport,
} from '../../src/messages/breaker';
import type { OutcomeKind } from '../../src/breaker';

export type EntityHandle = WorkflowHandle<typeof breakerEntityWorkflow>;

/** Starts an entity as the guard would: signal-with-start with a report (an empty one by default). */
export async function startEntity(
  client: Client,
  taskQueue: string,
  input: EntityInput,
  report: OutcomeReport = { reporter: 'test', counts: {} },
): Promise<EntityHandle> {
  return client.workflow.signalWithStart(breakerEntityWorkflow, {
    workflowId: breakerWorkflowId(input.key),
    taskQueue,
    args: [input],
    signal: reportSignal,
    signalArgs: [report],
  });
}

/**
 * Waits until the entity's view satisfies `pred`, advancing the time-skipping server's clock by `stepMs`
 * between looks (real time on a server that cannot skip). Fails with the last view after `maxSteps`.
 */
export async function waitForView(
  env: TestWorkflowEnvironment,
  handle: EntityHandle,
  pred: (v: BreakerView) => boolean,
  { stepMs = 500, maxSteps = 200 }: { stepMs?: number; maxSteps?: number } = {},
): Promise<BreakerView> {
  let view = await handle.query(viewQuery);
  for (let i = 0; i < maxSteps && !pred(view); i++) {
    if (env.supportsTimeSkipping) await env.sleep(stepMs);
    else await delay(stepMs);
    view = await handle.query(viewQuery);
  }
  if (!pred(view)) throw new Error(`entity view never matched; last: ${JSON.stringify(view)}`);
  return view;
}

/**
 * One half-open trial as a worker runs it: waits (skipping time) until the entity is half-open, asks for the
 * probe token as `requestId`, and answers with `outcome` in `latencyMs`. Throws when no token is granted.
 */
export async function probeOnce(
  env: TestWorkflowEnvironment,
  handle: EntityHandle,
  requestId: string,
  outcome: OutcomeKind,
  latencyMs = 30,
): Promise<void> {
  await waitForView(env, handle, (v) => v.state === 'half-open', { stepMs: 5_000, maxSteps: 40 });
  await handle.signal(requestProbeSignal, { requestId, requester: 'worker-1' });
  const d = await handle.query(probeDecisionQuery, requestId);
  if (d?.kind !== 'granted') throw new Error(`no grant for ${requestId}: ${JSON.stringify(d)}`);
  await handle.signal(probeResultSignal, { generation: d.token.generation, outcome, latencyMs });
}
