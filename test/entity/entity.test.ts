import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { histogramOf } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import {
  adminSignal,
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  statusQuery,
  transitionsQuery,
  viewQuery,
} from '../../src/messages/breaker';
import { worstCarried } from '../helpers/carried-worst-case';
import { probeOnce, startEntity, waitForView } from '../helpers/entity';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startTestEndpoint, type TestEndpoint } from '../helpers/tile-server';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let endpoint: TestEndpoint;
const taskQueue = uniqueTaskQueue('entity');
let n = 0;
/** A fresh key per test, so tests never share an entity. */
const key = () => `http://127.0.0.1:1/test-${process.pid}-${++n}`;
const noSA = { searchAttributes: false };

before(async () => {
  env = await timeSkippingEnv();
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
  worker?.shutdown();
  await running;
  await env?.teardown();
  await endpoint?.close();
});

describe('tripping', () => {
  test('the fleet-wide failure ratio trips the entity', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), options: noSA });
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 6, transient: 4 } });
    assert.equal((await h.query(viewQuery)).state, 'closed');
    // A second worker's report crosses the threshold of the window both share.
    await h.signal(reportSignal, { reporter: 'w2', counts: { success: 4, 'service-exception': 6 } });
    const view = await h.query(viewQuery);
    assert.equal(view.state, 'open');
    const [trip] = await h.query(transitionsQuery, 1);
    assert.equal(trip!.reason, 'failure-ratio');
    assert.equal(trip!.figures!.n, 20);
    assert.equal(trip!.figures!.failures, 10);
  });

  test('no trip below minSamples, however bad the ratio', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), options: noSA });
    for (let i = 0; i < 19; i++) await h.signal(reportSignal, { reporter: `w${i}`, counts: { transient: 1 } });
    const status = await h.query(statusQuery);
    assert.equal(status.view.state, 'closed');
    assert.equal(status.figures.failures, 19);
    assert.equal(status.counters.reports, 20);
  });

  test('p95 latency over the budget trips it', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), config: { healthyP95Ms: 200 }, options: noSA });
    const slow = histogramOf(Array.from({ length: 30 }, (_, i) => (i < 25 ? 150 : 900)));
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 30 }, latency: slow });
    assert.equal((await h.query(viewQuery)).state, 'open');
    const [trip] = await h.query(transitionsQuery, 1);
    assert.equal(trip!.reason, 'latency');
    assert.ok(trip!.figures!.p95Ms! > 300);
  });
});

describe('cooldown and probes', () => {
  test('open -> durable cooldown -> half-open with no traffic -> self-probe -> closed', async () => {
    const before = endpoint.requests;
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 10 * 60_000, cooldownJitter: 0, probesToClose: 3 },
      probe: { url: `${endpoint.url}/0/0/0.png`, contentTypePrefix: 'image/' },
      options: { ...noSA, selfProbeDelayMs: 5_000 },
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    const open = await h.query(viewQuery);
    assert.equal(open.state, 'open');
    // Ten minutes of cooldown, skipped: nobody sends traffic, the entity probes three times by itself.
    await waitForView(env, h, (v) => v.state === 'closed', { stepMs: 60_000, maxSteps: 30 });
    const transitions = (await h.query(transitionsQuery)).reverse();
    assert.deepEqual(
      transitions.map((t) => `${t.from}>${t.to}:${t.reason}`),
      ['closed>open:failure-ratio', 'open>half-open:cooldown-elapsed', 'half-open>closed:probes-succeeded'],
    );
    assert.equal(
      transitions[1]!.at - transitions[0]!.at,
      10 * 60_000,
      'the cooldown ran on a durable timer to the millisecond',
    );
    const status = await h.query(statusQuery);
    assert.equal(status.counters.selfProbes, 3);
    assert.equal(endpoint.requests - before, 3, 'three real HTTP probes reached the endpoint');
  });

  test('with probeIntervalMs null, a failed probe re-opens with a doubled cooldown', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 60_000, cooldownJitter: 0, probeIntervalMs: null },
      options: noSA,
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 30_000 });
    await h.signal(requestProbeSignal, { requestId: 'r1', requester: 'w1' });
    const decision = await h.query(probeDecisionQuery, 'r1');
    assert.equal(decision?.kind, 'granted');
    if (decision?.kind !== 'granted') return;
    await h.signal(probeResultSignal, { generation: decision.token.generation, outcome: 'transient' });
    const [reopen] = await h.query(transitionsQuery, 1);
    assert.deepEqual(
      [reopen!.from, reopen!.to, reopen!.reason, reopen!.cooldownMs],
      ['half-open', 'open', 'probe-failed', 120_000],
    );
    const status = await h.query(statusQuery);
    // Doubled as its incident grows, yet one open: a failed probe is not another incident.
    assert.deepEqual([status.permit.allow, status.permit.retryAfterMs, status.consecutiveOpens], [false, 120_000, 1]);
  });

  test('by default a failed probe re-opens for 5 s, not the doubled 120 s: the next probe tests again soon', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 60_000, cooldownJitter: 0 },
      options: noSA,
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 30_000 });
    await h.signal(requestProbeSignal, { requestId: 'r1', requester: 'w1' });
    const decision = await h.query(probeDecisionQuery, 'r1');
    if (decision?.kind !== 'granted') return assert.fail(`expected a grant, got ${JSON.stringify(decision)}`);
    await h.signal(probeResultSignal, { generation: decision.token.generation, outcome: 'transient' });
    const [reopen] = await h.query(transitionsQuery, 1);
    assert.deepEqual([reopen!.reason, reopen!.cooldownMs], ['probe-failed', 5_000]);
    const status = await h.query(statusQuery);
    assert.deepEqual(
      [status.config.probeIntervalMs, status.consecutiveOpens],
      [5_000, 1],
      'one incident, one open: the next trip from closed waits longer only if it comes within the flap window',
    );
  });

  test('a new entity: one incident is one open: a second hang 90 s after the first closed, its probe failed, waits the base cooldown again', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 30_000, cooldownJitter: 0, probesToClose: 1 },
      options: noSA,
    });
    let id = 0;
    const hang = async () => {
      await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
      await waitForView(env, h, (v) => v.state === 'open', { stepMs: 100, maxSteps: 50 });
      await probeOnce(env, h, `i${++id}`, 'transient');
      await probeOnce(env, h, `i${++id}`, 'success');
      await waitForView(env, h, (v) => v.state === 'closed', { stepMs: 100, maxSteps: 50 });
    };
    await hang();
    await env.sleep(90_000);
    await hang();
    const trips = (await h.query(transitionsQuery, 20)).filter((t) => t.from === 'closed' && t.to === 'open').reverse();
    assert.deepEqual(
      trips.map((t) => t.cooldownMs),
      [30_000, 30_000],
    );
    const status = await h.query(statusQuery);
    assert.equal(status.config.flapWindowMs, 60_000, "a new entity's flap window: twice its cooldown");
  });

  test('a new entity backs off its failed trials (5, 10, 20 s, ... up to 8x) and a k-of-n round closes on 2 of 3', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 60_000, cooldownJitter: 0, probesToClose: 2, probeTrials: 3 },
      options: noSA,
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    let id = 0;
    const probe = (outcome: 'success' | 'transient') => probeOnce(env, h, `r${++id}`, outcome);
    // Each round of 3 trials reopens at its second failure: 2 of 3 can no longer be reached.
    for (let round = 0; round < 4; round++) {
      await probe('transient');
      await probe('transient');
    }
    const reopens = (await h.query(transitionsQuery, 20)).filter((t) => t.reason === 'probe-failed').reverse();
    assert.deepEqual(
      reopens.map((t) => t.cooldownMs),
      [5_000, 10_000, 20_000, 40_000],
    );
    assert.match(reopens[0]!.detail, /2 of 3 trials failed/);
    const status = await h.query(statusQuery);
    assert.deepEqual(
      [status.config.probeBackoff, status.config.probeTrials, status.config.slowCallMs],
      [2, 3, 10_000],
      "a new entity's defaults",
    );
    // One failed trial among three does not reopen: success, failure, success closes.
    await probe('success');
    await probe('transient');
    await probe('success');
    const [closed] = await h.query(transitionsQuery, 1);
    assert.deepEqual([closed!.to, closed!.reason], ['closed', 'probes-succeeded']);
    assert.match(closed!.detail, /2 successful probes of 3 trials/);
  });

  test('a new entity trips on the slow-call rate (calls completing in over 10 s) and a probe that slow fails', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 60_000, cooldownJitter: 0, probesToClose: 1 },
      options: noSA,
    });
    const latency = histogramOf([...new Array<number>(12).fill(12_000), ...new Array<number>(12).fill(800)]);
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 12 }, latency });
    await h.signal(reportSignal, { reporter: 'w2', counts: { success: 12 }, latency });
    const [trip] = await h.query(transitionsQuery, 1);
    assert.deepEqual([trip!.to, trip!.reason], ['open', 'slow-calls']);
    assert.match(trip!.detail, /24\/48 calls slower than 10000 ms/);
    await waitForView(env, h, (v) => v.state === 'half-open', { stepMs: 30_000 });
    await h.signal(requestProbeSignal, { requestId: 'slow', requester: 'w1' });
    const d = await h.query(probeDecisionQuery, 'slow');
    if (d?.kind !== 'granted') return assert.fail(`expected a grant, got ${JSON.stringify(d)}`);
    await h.signal(probeResultSignal, { generation: d.token.generation, outcome: 'success', latencyMs: 11_000 });
    const [reopen] = await h.query(transitionsQuery, 1);
    assert.deepEqual([reopen!.reason, reopen!.to], ['probe-failed', 'open']);
    assert.match(reopen!.detail, /slower than the slow-call threshold 10000 ms/);
  });

  test('exactly one of 20 concurrent requesters gets the probe token', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), config: { cooldownMs: 1_000 }, options: noSA });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    await waitForView(env, h, (v) => v.state === 'half-open');
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        h.signal(requestProbeSignal, { requestId: `c${i}`, requester: `worker-${i}` }),
      ),
    );
    const decisions = await Promise.all(Array.from({ length: 20 }, (_, i) => h.query(probeDecisionQuery, `c${i}`)));
    assert.equal(decisions.filter((d) => d?.kind === 'granted').length, 1);
    assert.equal(decisions.filter((d) => d?.kind === 'denied' && d.reason === 'busy').length, 19);
    assert.equal((await h.query(viewQuery)).probesOutstanding, 1);
  });

  test('a vanished holder’s lease expires and the next requester gets a new generation; its late result is ignored', async () => {
    const h = await startEntity(env.client, taskQueue, {
      key: key(),
      config: { cooldownMs: 1_000, probeLeaseMs: 30_000 },
      options: noSA,
    });
    await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 20 } });
    await waitForView(env, h, (v) => v.state === 'half-open');
    await h.signal(requestProbeSignal, { requestId: 'gone', requester: 'crashed-worker' });
    const first = await h.query(probeDecisionQuery, 'gone');
    assert.equal(first?.kind, 'granted');
    await waitForView(env, h, (v) => v.probesOutstanding === 0, { stepMs: 5_000 });
    await h.signal(requestProbeSignal, { requestId: 'next', requester: 'worker-2' });
    const second = await h.query(probeDecisionQuery, 'next');
    assert.ok(first?.kind === 'granted' && second?.kind === 'granted');
    assert.equal(second.token.generation, first.token.generation + 1);
    // The crashed worker comes back with a success for the old generation: ignored, nothing changes. Its
    // report of calls decided on a view before the last grant is counted as late.
    await h.signal(probeResultSignal, { generation: first.token.generation, outcome: 'success' });
    await h.signal(reportSignal, {
      reporter: 'crashed-worker',
      generation: first.token.generation,
      counts: { transient: 1 },
    });
    const status = await h.query(statusQuery);
    assert.equal(status.counters.ignoredResults, 1);
    assert.equal(status.counters.lateReports, 1);
    assert.equal(status.probeSuccesses, 0);
    assert.equal(status.probes.length, 1);
  });
});

describe('admin', () => {
  test('force-open with a duration, its expiry, force-close, disable, enable, reset and configure', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), options: noSA });
    await h.signal(adminSignal, {
      action: 'force-open',
      durationMs: 3_600_000,
      reason: 'renderer upgrade',
      actor: 'sre-1',
    });
    let view = await h.query(viewQuery);
    assert.equal(view.state, 'forced-open');
    view = await waitForView(env, h, (v) => v.state !== 'forced-open', { stepMs: 600_000 });
    assert.equal(view.state, 'half-open');
    await h.signal(adminSignal, { action: 'force-close' });
    assert.equal((await h.query(viewQuery)).state, 'forced-closed');
    await h.signal(reportSignal, { reporter: 'w', counts: { transient: 50 } });
    assert.equal((await h.query(viewQuery)).state, 'forced-closed', 'a forced-closed breaker never trips');
    await h.signal(adminSignal, { action: 'disable' });
    assert.equal((await h.query(viewQuery)).state, 'metrics-only');
    await h.signal(adminSignal, { action: 'enable' });
    assert.equal((await h.query(viewQuery)).state, 'closed');
    await h.signal(adminSignal, { action: 'configure', config: { minSamples: 5 } });
    await h.signal(adminSignal, { action: 'configure', config: { failureRatio: 7 } });
    const status = await h.query(statusQuery);
    assert.equal(status.config.minSamples, 5);
    assert.equal(status.config.failureRatio, 0.5, 'an invalid configuration is refused');
    await h.signal(reportSignal, { reporter: 'w', counts: { transient: 5 } });
    assert.equal((await h.query(viewQuery)).state, 'open', 'the new minSamples applies');
    await h.signal(adminSignal, { action: 'reset', reason: 'false alarm' });
    assert.equal((await h.query(viewQuery)).state, 'closed');
    const log = (await h.query(transitionsQuery)).reverse();
    assert.deepEqual(
      log.map((t) => t.reason),
      ['forced-open', 'force-expired', 'forced-close', 'disabled', 'enabled', 'configured', 'failure-ratio', 'reset'],
    );
    assert.match(log[0]!.detail, /renderer upgrade \(by "sre-1", claimed\)/);
  });

  test('an action with a sender records the actor as claimed and the sender; a malformed sender does not drop it', async () => {
    const h = await startEntity(env.client, taskQueue, { key: key(), options: noSA });
    const sender = { identity: '42@ops-host', user: 'sre', host: 'ops-host' };
    await h.signal(adminSignal, { action: 'force-open', reason: 'renderer upgrade', actor: 'sre-1', sender });
    await h.signal(adminSignal, { action: 'configure', config: { minSamples: 5 }, sender });
    // Whatever a client puts in the payload, the action is applied: a handler must not throw.
    await h.signal(adminSignal, { action: 'reset', sender: { identity: 7, user: null } as never });
    assert.equal((await h.query(viewQuery)).state, 'closed');
    const [reset, configured, opened] = await h.query(transitionsQuery, 3);
    assert.equal(opened!.detail, 'renderer upgrade (by "sre-1", claimed; sent by 42@ops-host as sre@ops-host)');
    assert.equal(opened!.actor, 'sre-1');
    assert.deepEqual(opened!.sender, sender);
    assert.equal(configured!.reason, 'configured');
    assert.deepEqual(configured!.sender, sender);
    assert.equal(configured!.actor, undefined);
    assert.equal(reset!.detail, 'sent by ? as ?@?');
    assert.deepEqual(reset!.sender, { identity: '?', user: '?', host: '?' });
  });
});

describe('idle', () => {
  test('a closed breaker with no reports for idleMs finishes, and the next report starts it again', async () => {
    const k = key();
    const h = await startEntity(env.client, taskQueue, { key: k, options: { ...noSA, idleMs: 30 * 60_000 } });
    await h.signal(reportSignal, { reporter: 'w1', counts: { success: 5 } });
    const firstRun = (await h.describe()).runId;
    const exit = await h.result(); // the time-skipping server skips the idle half hour
    assert.equal(exit.reason, 'idle');
    assert.equal(exit.counters.reports, 2);
    const again = await startEntity(
      env.client,
      taskQueue,
      { key: k, options: { ...noSA, idleMs: 30 * 60_000 } },
      { reporter: 'w1', counts: { transient: 1 } },
    );
    const status = await again.query(statusQuery);
    assert.equal(status.counters.reports, 1);
    assert.equal(status.figures.transient, 1);
    assert.notEqual((await again.describe()).runId, firstRun);
  });
});

describe('continue-as-new', () => {
  test('a run carrying a large payload from before the bound continues as new with under 64 KB, its state kept', async () => {
    const k = key();
    const now = await env.currentTimeMs();
    // What a run before the bound carried at its largest that Temporal still takes: a 600-bucket window of wide
    // histograms, the default log of 500 transitions with their figures, 256 decisions, 1,000 reporters.
    const worst = worstCarried(now);
    const log = worst.log.slice(0, 500).map((t) => ({
      ...t,
      detail: t.detail.slice(0, 120),
      actor: 'alice',
      sender: { identity: '1234@ops-host', user: 'alice', host: 'ops-host' },
    }));
    // (searchAttributesOn false: the test server has no BreakerState.)
    const carried = {
      ...worst,
      log,
      searchAttributesOn: false,
      policy: { ...worst.policy, probes: worst.policy.probes.slice(0, 1) },
    };
    const h = await startEntity(env.client, taskQueue, { key: k, carried, options: { ...noSA, maxHistoryEvents: 50 } });
    const firstRun = (await h.describe()).runId;
    // Enough reports to pass 50 events, then quiet: a continue-as-new completes only in a task no new signal
    // interrupts.
    const sent = 40;
    for (let i = 1; i < sent; i++) await h.signal(reportSignal, { reporter: `w${i % 7}`, counts: { success: 1 } });
    for (let i = 0; i < 300 && (await h.describe()).runId === firstRun; i++)
      await new Promise((r) => setTimeout(r, 100));
    const history = await env.client.workflow.getHandle(h.workflowId, firstRun).fetchHistory();
    const can = history.events!.find(
      (e) => e.workflowExecutionContinuedAsNewEventAttributes,
    )?.workflowExecutionContinuedAsNewEventAttributes;
    assert.ok(can, `no continue-as-new after ${sent} reports`);
    const bytes = can.input!.payloads![0]!.data!.length;
    assert.ok(bytes < 64 * 1024, `continue-as-new carried ${bytes} bytes`);
    // The next run holds the state: the policy, the counters, the newest transitions.
    const status = await env.client.workflow.getHandle(h.workflowId).query(statusQuery);
    assert.equal(status.config.windowMs, 3_600_000);
    assert.equal(status.consecutiveOpens, worst.policy.consecutiveOpens);
    assert.equal(status.counters.reports, worst.counters.reports + sent);
    assert.ok(status.figures.samples > 600 * 987_654, `${status.figures.samples} samples`);
    const transitions = await env.client.workflow.getHandle(h.workflowId).query(transitionsQuery);
    assert.ok(transitions.length >= 200, `${transitions.length} transitions`);
    assert.deepEqual(
      transitions.slice(0, 200).map((t) => [t.at, t.reason]),
      log.slice(0, 200).map((t) => [t.at, t.reason]),
    );
  });

  test("the next run's memo holds the view from its start, so a guard reading it before that run's first task sees the breaker open, not closed", async () => {
    const k = key();
    const h = await startEntity(env.client, taskQueue, {
      key: k,
      config: { minSamples: 5, cooldownMs: 3_600_000 },
      options: { ...noSA, maxHistoryEvents: 50 },
    });
    await h.signal(reportSignal, { reporter: 'w', counts: { transient: 10 } });
    assert.equal((await h.query(viewQuery)).state, 'open');
    const firstRun = (await h.describe()).runId;
    for (let i = 0; i < 30; i++) await h.signal(reportSignal, { reporter: `w${i % 3}`, counts: { transient: 1 } });
    for (let i = 0; i < 300 && (await h.describe()).runId === firstRun; i++)
      await new Promise((r) => setTimeout(r, 100));
    const next = await env.client.workflow.getHandle(h.workflowId).describe();
    assert.notEqual(next.runId, firstRun, 'no continue-as-new');
    // The memo the next run was started with (its first event), before any task of its own ran.
    const started = (await env.client.workflow.getHandle(h.workflowId, next.runId).fetchHistory()).events![0]!
      .workflowExecutionStartedEventAttributes!;
    const memo = started.memo?.fields?.['view'];
    assert.ok(memo, 'the next run started with no view in its memo');
    const view = JSON.parse(Buffer.from(memo.data!).toString('utf8')) as { state: string; cooldownUntil: number };
    assert.equal(view.state, 'open');
    assert.equal(view.cooldownUntil, (await h.query(viewQuery)).cooldownUntil);
  });

  test('carries the whole state and loses no signal sent while it happens', async () => {
    const k = key();
    const h = await startEntity(env.client, taskQueue, {
      key: k,
      config: { minSamples: 1_000_000 },
      options: { ...noSA, maxHistoryEvents: 60 },
    });
    await h.signal(adminSignal, { action: 'disable', reason: 'before continue-as-new' });
    const firstRun = (await h.describe()).runId;
    // 300 reports from 10 concurrent senders: the entity continues as new meanwhile.
    await Promise.all(
      Array.from({ length: 10 }, async (_, w) => {
        for (let i = 0; i < 30; i++) await h.signal(reportSignal, { reporter: `w${w}`, counts: { success: 1 } });
      }),
    );
    const status = await env.client.workflow.getHandle(h.workflowId).query(statusQuery);
    assert.ok(status.counters.continuedAsNew >= 1, `continued as new ${status.counters.continuedAsNew} times`);
    assert.equal(status.counters.reports, 301, 'every report arrived (300 plus the starting one)');
    assert.equal(status.figures.successes, 300);
    assert.equal(status.view.state, 'metrics-only', 'the mode survived');
    assert.equal(status.config.minSamples, 1_000_000, 'the configuration survived');
    const log = await env.client.workflow.getHandle(h.workflowId).query(transitionsQuery);
    assert.equal(log[log.length - 1]!.detail, 'before continue-as-new', 'the transition log survived');
    assert.notEqual((await env.client.workflow.getHandle(h.workflowId).describe()).runId, firstRun);
  });
});
