import type { Client, WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { histogramOf } from '../../src/breaker';
import {
  adminSignal,
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  viewQuery,
} from '../../src/messages/breaker';
import { probeOnce, startEntity, waitForView } from '../helpers/entity';
import { startTestEndpoint } from '../helpers/tile-server';

/** What a recorded scenario gets: a time-skipping environment with a tilebreaker worker on `taskQueue`. */
export interface ScenarioContext {
  env: TestWorkflowEnvironment;
  client: Client;
  taskQueue: string;
}

/** Drives one entity run to its end and returns a handle on exactly that run, for its history. */
export type EntityScenario = (ctx: ScenarioContext) => Promise<WorkflowHandle>;

const idle = { searchAttributes: false, idleMs: 10 * 60_000 };

/** An outage with no traffic during recovery: trip, durable cooldown, three self-probes, closed, idle finish. */
export const entitySelfProbeRecovery: EntityScenario = async ({ env, client, taskQueue }) => {
  const endpoint = await startTestEndpoint(200);
  try {
    const h = await startEntity(client, taskQueue, {
      key: 'http://127.0.0.1:1/recorded-self-probe',
      config: { cooldownMs: 5 * 60_000, probesToClose: 3 },
      probe: { url: `${endpoint.url}/0/0/0.png`, contentTypePrefix: 'image/' },
      options: { ...idle, selfProbeDelayMs: 2_000 },
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 12, transient: 9 } });
    await h.signal(reportSignal, { reporter: 'w2', counts: { success: 3, 'service-exception': 8, permanent: 1 } });
    await waitForView(env, h, (v) => v.state === 'closed', { stepMs: 60_000, maxSteps: 30 });
    await h.result();
    return h;
  } finally {
    await endpoint.close();
  }
};

/** Probe contention: 20 requesters, a vanished holder's lease, a stale result, a failed probe, recovery. */
export const entityProbeContention: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-contention',
    config: { cooldownMs: 60_000, probeLeaseMs: 30_000, probesToClose: 2 },
    options: idle,
  });
  await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 25 } });
  await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 30_000 });
  await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      h.signal(requestProbeSignal, { requestId: `a${i}`, requester: `worker-${i}` }),
    ),
  );
  const granted = (await Promise.all(Array.from({ length: 20 }, (_, i) => h.query(probeDecisionQuery, `a${i}`)))).find(
    (d) => d?.kind === 'granted',
  );
  if (granted?.kind !== 'granted') throw new Error('no grant');
  // The holder vanishes; its lease lapses; a late result for its generation is ignored.
  await waitForView(env, h, (v) => v.probesOutstanding === 0, { stepMs: 10_000 });
  await h.signal(probeResultSignal, { generation: granted.token.generation, outcome: 'success' });
  const probe = async (id: string, outcome: 'success' | 'transient') => {
    await h.signal(requestProbeSignal, { requestId: id, requester: 'worker-x' });
    const d = await h.query(probeDecisionQuery, id);
    if (d?.kind !== 'granted') throw new Error(`no grant for ${id}: ${JSON.stringify(d)}`);
    await h.signal(probeResultSignal, { generation: d.token.generation, outcome, latencyMs: 40 });
  };
  await probe('b', 'transient');
  await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 30_000 });
  await probe('c', 'success');
  await probe('d', 'success');
  if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
  await h.result();
  return h;
};

/**
 * Failed trials back off (new entity defaults: 5 s, doubling) in k-of-n rounds (2 of at most 3): two rounds
 * reopen at their second failure, then success, failure, success closes, and the entity finishes idle.
 */
export const entityFailedTrials: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-failed-trials',
    config: { cooldownMs: 60_000, probesToClose: 2, probeTrials: 3 },
    options: idle,
  });
  await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 25 } });
  const outcomes = ['transient', 'transient', 'transient', 'transient', 'success', 'transient', 'success'] as const;
  for (const [i, outcome] of outcomes.entries()) await probeOnce(env, h, `t${i + 1}`, outcome);
  if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
  await h.result();
  return h;
};

/**
 * One incident is one open (a new entity's flap window): a trip, a failed probe, a close; 90 s later a second
 * trip waits the base cooldown again, not one grown by the first incident's failed probe.
 */
export const entityOneIncident: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-one-incident',
    config: { cooldownMs: 30_000, probesToClose: 1 },
    options: idle,
  });
  for (const incident of [1, 2]) {
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 25 } });
    await waitForView(env, h, (v) => v.state === 'open');
    await probeOnce(env, h, `i${incident}-1`, 'transient');
    await probeOnce(env, h, `i${incident}-2`, 'success');
    if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
    if (incident === 1) await env.sleep(90_000);
  }
  await h.result();
  return h;
};

/**
 * The slow-call rate (a new entity's default threshold, 10 s): reports of slow successes trip it, a probe
 * slower than the threshold fails, two fast ones close it, and the entity finishes idle.
 */
export const entitySlowCalls: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-slow-calls',
    config: { cooldownMs: 60_000, probesToClose: 2 },
    options: idle,
  });
  const latency = histogramOf([...new Array<number>(14).fill(12_000), ...new Array<number>(10).fill(800)]);
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 12 }, latency });
  await h.signal(reportSignal, { reporter: 'w2', counts: { success: 12 }, latency });
  await waitForView(env, h, (v) => v.state === 'open');
  for (const [i, ms] of [11_000, 900, 700].entries()) await probeOnce(env, h, `s${i + 1}`, 'success', ms);
  if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
  await h.result();
  return h;
};

/**
 * A renderer taking 1-3 s hangs: the view gives the fleet's stall threshold, and the stalls, which arrive over
 * a render time, trip the breaker in a fast window that reaches back the p95 latency; then two probes close it.
 */
export const entityRenderTimeStalls: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-render-time-stalls',
    config: { cooldownMs: 60_000, probesToClose: 2 },
    options: idle,
  });
  const latency = histogramOf(Array.from({ length: 20 }, (_, i) => 1_000 + i * 100));
  for (let i = 0; i < 6; i++) {
    await h.signal(reportSignal, { reporter: `w${i % 2}`, counts: { success: 20 }, latency });
    await env.sleep(1_000);
  }
  if ((await h.query(viewQuery)).fleet?.stallMs === undefined)
    throw new Error('the view gave no fleet stall threshold');
  await env.sleep(4_000);
  for (let i = 0; i < 12 && (await h.query(viewQuery)).state === 'closed'; i++) {
    await h.signal(reportSignal, { reporter: `w${i % 2}`, counts: { transient: 4 }, stalled: 4 });
    await env.sleep(250);
  }
  await waitForView(env, h, (v) => v.state === 'open');
  for (const [i, ms] of [2_000, 1_500].entries()) await probeOnce(env, h, `s${i + 1}`, 'success', ms);
  if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
  await h.result();
  return h;
};

/**
 * One worker early in a night (8 calls in flight, 13 answers of 2.5-3.5 s) on a renderer that hangs: its stalls,
 * which arrive over 1.5 s, trip the breaker in a fast window that reaches back the p95 latency, though the window
 * holds fewer latency samples than latencyMinSamples; then a probe closes it.
 */
export const entityStallSpan: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-stall-span',
    config: { cooldownMs: 60_000, probesToClose: 1 },
    options: idle,
  });
  for (let i = 0; i < 13; i++) {
    await h.signal(reportSignal, {
      reporter: 'w1',
      counts: { success: 1 },
      latency: histogramOf([2_500 + 80 * i]),
      inFlight: 8,
    });
    await env.sleep(600);
  }
  await env.sleep(4_000);
  for (const stalls of [3, 2, 2, 1]) {
    if ((await h.query(viewQuery)).state !== 'closed') break;
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: stalls }, stalled: stalls, inFlight: 8 });
    await env.sleep(500);
  }
  await waitForView(env, h, (v) => v.state === 'open');
  await probeOnce(env, h, 's1', 'success', 2_600);
  if ((await h.query(viewQuery)).state !== 'closed') throw new Error('did not close');
  await h.result();
  return h;
};

/**
 * A 503's Retry-After under a closed breaker (a new entity): the failures pause the fleet as a 429 does, the
 * pause ends, the endpoint answers again and the entity finishes idle, never having opened.
 */
export const entityRetryAfterPause: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-retry-after-pause',
    config: { minSamples: 20 },
    options: idle,
  });
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 30 } });
  await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 4 }, retryAfterMs: 20_000 });
  await waitForView(env, h, (v) => v.pacedUntil !== undefined);
  await env.sleep(30_000);
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 10 } });
  await waitForView(env, h, (v) => v.pacedUntil === undefined && v.state === 'closed');
  await h.result();
  return h;
};

/** Operator actions, then a burst of reports that makes the entity continue as new: the first run's history. */
export const entityAdminContinueAsNew: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-admin',
    config: { minSamples: 10 },
    options: { ...idle, maxHistoryEvents: 80 },
  });
  const firstRunId = (await h.describe()).runId;
  await h.signal(adminSignal, {
    action: 'force-open',
    durationMs: 15 * 60_000,
    reason: 'renderer upgrade',
    actor: 'sre',
  });
  await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 5 * 60_000 });
  await h.signal(adminSignal, { action: 'force-close', actor: 'sre' });
  await h.signal(adminSignal, { action: 'configure', config: { failureRatio: 0.3 } });
  await h.signal(adminSignal, { action: 'disable' });
  await h.signal(reportSignal, { reporter: 'w', counts: { transient: 12 } });
  await h.signal(adminSignal, { action: 'enable' });
  await h.signal(adminSignal, { action: 'reset', reason: 'done' });
  for (let i = 0; i < 60; i++) await h.signal(reportSignal, { reporter: `w${i % 4}`, counts: { success: 3 } });
  const first = client.workflow.getHandle(h.workflowId, firstRunId);
  for (let i = 0; i < 100 && (await first.describe()).status.name === 'RUNNING'; i++) await env.sleep(1_000);
  if ((await first.describe()).status.name !== 'CONTINUED_AS_NEW')
    throw new Error('the first run did not continue as new');
  await h.signal(adminSignal, { action: 'force-open', reason: 'stop the new run' });
  await client.workflow.getHandle(h.workflowId).terminate('recording done');
  return first;
};

/**
 * The same outage on the entity as it runs today (default options): the search-attribute check activity,
 * the view in the memo, idle counted from the last transition.
 */
export const entityOutageDefaults: EntityScenario = async ({ env, client, taskQueue }) => {
  const endpoint = await startTestEndpoint(200);
  try {
    const h = await startEntity(client, taskQueue, {
      key: 'http://127.0.0.1:1/recorded-defaults',
      config: { cooldownMs: 2 * 60_000, probesToClose: 2 },
      probe: { url: `${endpoint.url}/0/0/0.png`, contentTypePrefix: 'image/' },
      options: { idleMs: 10 * 60_000 },
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 400 } });
    await env.sleep(20_000);
    // The fast window: 45 failures now outweigh nothing in the newest buckets, though 400 successes remain in the window.
    await h.signal(reportSignal, { reporter: 'w2', counts: { transient: 30, 'service-exception': 15 } });
    await waitForView(env, h, (v) => v.state === 'closed', { stepMs: 30_000, maxSteps: 40 });
    await h.result();
    return h;
  } finally {
    await endpoint.close();
  }
};

/** A rate-limited endpoint: reporters counted, the limit reconfigured, the count carried across continue-as-new. */
export const entityRateLimit: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-rate-limit',
    config: { minSamples: 10, maxRequestsPerSecond: 10 },
    options: { ...idle, maxHistoryEvents: 60 },
  });
  const firstRunId = (await h.describe()).runId;
  for (let i = 0; i < 6; i++) await h.signal(reportSignal, { reporter: `w${i % 3}`, counts: {} });
  await waitForView(env, h, (v) => (v.activeReporters ?? 0) >= 3);
  await h.signal(adminSignal, { action: 'configure', config: { maxRequestsPerSecond: 20 }, actor: 'sre' });
  for (let i = 0; i < 40; i++) await h.signal(reportSignal, { reporter: `w${i % 3}`, counts: { success: 2 } });
  const first = client.workflow.getHandle(h.workflowId, firstRunId);
  for (let i = 0; i < 100 && (await first.describe()).status.name === 'RUNNING'; i++) await env.sleep(1_000);
  if ((await first.describe()).status.name !== 'CONTINUED_AS_NEW')
    throw new Error('the first run did not continue as new');
  await client.workflow.getHandle(h.workflowId).terminate('recording done');
  return first;
};

/**
 * The bounded carry: a trip with its figures, operators' actions, then reports
 * until the entity has continued as new twice. The second run's history: it starts from a carried payload in
 * the bounded form (a packed window, the log) and continues as new carrying one.
 */
export const entityCompactCarry: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-compact-carry',
    config: { minSamples: 10, cooldownMs: 60_000 },
    options: { ...idle, maxHistoryEvents: 60 },
  });
  await h.signal(reportSignal, {
    reporter: 'w1',
    // Failures from two reporters: the quorum (2) is met.
    counts: { success: 4, transient: 2 },
    latency: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2],
  });
  await h.signal(reportSignal, { reporter: 'w2', counts: { transient: 6, 'service-exception': 2 } });
  await waitForView(env, h, (v) => v.state === 'open');
  await h.signal(adminSignal, { action: 'force-close', reason: 'the renderer is back', actor: 'sre' });
  const runs: string[] = [(await h.describe()).runId];
  // Bursts of reports, each followed by a quiet second: a continue-as-new completes in a task no signal interrupts.
  for (let burst = 0; burst < 20 && runs.length < 3; burst++) {
    for (let i = 0; i < 20; i++)
      await h.signal(reportSignal, { reporter: `w${i % 3}`, counts: { success: 2 }, inFlight: 2 });
    await env.sleep(1_000);
    const run = (await client.workflow.getHandle(h.workflowId).describe()).runId;
    if (run !== runs[runs.length - 1]) runs.push(run);
  }
  if (runs.length < 3) throw new Error('the entity did not continue as new twice');
  const second = client.workflow.getHandle(h.workflowId, runs[1]);
  for (let i = 0; i < 100 && (await second.describe()).status.name === 'RUNNING'; i++) await env.sleep(1_000);
  await client.workflow.getHandle(h.workflowId).terminate('recording done');
  return second;
};

/**
 * The view in the next run's memo: a trip to open with a long cooldown, then
 * failure reports until the entity continues as new. The first run's history: it ends by continuing as new with
 * the open view in the next run's memo.
 */
export const entityMemoAcrossContinue: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-memo-across-continue',
    config: { minSamples: 5, cooldownMs: 3_600_000 },
    options: { ...idle, maxHistoryEvents: 60 },
  });
  await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 10 } });
  await waitForView(env, h, (v) => v.state === 'open');
  const first = (await h.describe()).runId;
  const current = async () => (await client.workflow.getHandle(h.workflowId).describe()).runId;
  // Bursts of reports, each followed by a quiet second: a continue-as-new completes in a task no signal interrupts.
  for (let burst = 0; burst < 20 && (await current()) === first; burst++) {
    for (let i = 0; i < 20; i++) await h.signal(reportSignal, { reporter: `w${i % 3}`, counts: { transient: 1 } });
    await env.sleep(1_000);
  }
  if ((await current()) === first) throw new Error('the entity did not continue as new');
  await client.workflow.getHandle(h.workflowId).terminate('recording done');
  return client.workflow.getHandle(h.workflowId, first);
};

/** A rate-limited endpoint's 429s: a fleet-wide pause (capped), never a failure nor a transition, then idle. */
export const entityRateLimitedPacing: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, {
    key: 'http://127.0.0.1:1/recorded-429-pacing',
    config: { minSamples: 5 },
    options: idle,
  });
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 10 } });
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 2, 'rate-limited': 3 }, rateLimitedForMs: 2_000 });
  await h.signal(reportSignal, { reporter: 'w2', counts: { 'rate-limited': 40 }, rateLimitedForMs: 86_400_000 });
  await waitForView(env, h, (v) => v.pacedUntil !== undefined);
  await env.sleep(5 * 60_000);
  await h.signal(reportSignal, { reporter: 'w1', counts: { success: 10 } });
  await waitForView(env, h, (v) => v.pacedUntil === undefined && v.state === 'closed');
  await h.result();
  return h;
};

/**
 * The quorum (a new entity's default, 2): one reporter's failures among another's successes are declined (the
 * log says so), both failing trip it; an operator's reset, then the idle finish.
 */
export const entityQuorum: EntityScenario = async ({ env, client, taskQueue }) => {
  const h = await startEntity(client, taskQueue, { key: 'http://127.0.0.1:1/recorded-quorum', options: idle });
  await h.signal(reportSignal, { reporter: 'good', counts: { success: 10 } });
  await h.signal(reportSignal, { reporter: 'sick', counts: { transient: 40 } });
  await h.signal(reportSignal, { reporter: 'sick', counts: { transient: 40 } });
  await h.signal(reportSignal, { reporter: 'good', counts: { success: 2, transient: 30 } });
  await waitForView(env, h, (v) => v.state === 'open');
  await h.signal(adminSignal, { action: 'reset', reason: 'recorded scenario', actor: 'recorder' });
  await waitForView(env, h, (v) => v.state === 'closed');
  await h.result();
  return h;
};

/**
 * Signal checks: bad payloads refused (a force-open for 1e308 ms, negative and string counts, a file:// probe),
 * a report's self-probe adopted, an outage, recovery by that probe with no traffic, idle finish.
 */
export const entitySignalValidation: EntityScenario = async ({ env, client, taskQueue }) => {
  const endpoint = await startTestEndpoint(200);
  try {
    const h = await startEntity(client, taskQueue, {
      key: 'http://127.0.0.1:1/recorded-signal-validation',
      config: { cooldownMs: 60_000, probesToClose: 2 },
      options: { ...idle, selfProbeDelayMs: 2_000 },
    });
    await h.signal(adminSignal, { action: 'force-open', durationMs: 1e308, actor: 'x' });
    await h.signal(reportSignal, { reporter: 'evil', counts: { transient: -5 } });
    await h.signal(reportSignal, { reporter: 'evil', counts: { transient: '9' as never } });
    await h.signal(adminSignal, { action: 'set-probe', probe: { url: 'file:///etc/passwd' } });
    await h.signal(reportSignal, {
      reporter: 'w1',
      counts: { success: 12 },
      probe: { url: `${endpoint.url}/0/0/0.png`, contentTypePrefix: 'image/' },
    });
    await h.signal(reportSignal, { reporter: 'w2', counts: { transient: 25 } });
    // Two reporters failing: the quorum (a new entity's 2) is met.
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 25 } });
    await waitForView(env, h, (v) => v.state === 'open');
    await waitForView(env, h, (v) => v.state === 'closed', { stepMs: 30_000, maxSteps: 30 });
    await h.result();
    return h;
  } finally {
    await endpoint.close();
  }
};

export const entityScenarios = {
  'entity-signal-validation': entitySignalValidation,
  'entity-quorum': entityQuorum,
  'entity-failed-trials': entityFailedTrials,
  'entity-one-incident': entityOneIncident,
  'entity-slow-calls': entitySlowCalls,
  'entity-render-time-stalls': entityRenderTimeStalls,
  'entity-stall-span': entityStallSpan,
  'entity-retry-after-pause': entityRetryAfterPause,
  'entity-compact-carry': entityCompactCarry,
  'entity-rate-limited-pacing': entityRateLimitedPacing,
  'entity-rate-limit': entityRateLimit,
  'entity-outage-defaults': entityOutageDefaults,
  'entity-self-probe-recovery': entitySelfProbeRecovery,
  'entity-probe-contention': entityProbeContention,
  'entity-admin-continue-as-new': entityAdminContinueAsNew,
  'entity-memo-across-continue': entityMemoAcrossContinue,
} as const;
