import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { Quarantine } from '../../src/activities/guard/quarantine';
import { NO_METRICS } from '../../src/activities/metrics/worker-metrics';
import { breakerKey, breakerWorkflowId, type BreakerView } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery, transitionsQuery } from '../../src/messages/breaker';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const quiet = { warn: () => undefined };
const proceed = (key: string): GuardDecision => ({
  kind: 'proceed',
  key,
  state: 'closed',
  allowance: 1,
  failOpen: false,
});
const fleetView = (failureRatio: number, reporters: number): BreakerView => ({
  state: 'closed',
  mode: 'auto',
  phase: 'closed',
  cooldownUntil: null,
  forcedUntil: null,
  rampStartedAt: null,
  rampMs: 0,
  rampFloor: 0.1,
  probesOutstanding: 0,
  maxConcurrentProbes: 1,
  generation: 0,
  fleet: { failureRatio, reporters },
});

describe('quarantine: the rule (injected clock)', () => {
  test('five calls in a row failing locally quarantine the worker; one probe call per interval; a success lifts it', () => {
    const q = new Quarantine({ probeIntervalMs: 2_000 }, NO_METRICS, quiet);
    const k = 'http://tiles.example.test:80';
    let t = 1_000;
    for (let i = 0; i < 4; i++) q.outcome(proceed(k), 'local', undefined, (t += 10));
    assert.equal(q.quarantined(k), false);
    q.outcome(proceed(k), 'local', undefined, (t += 10));
    assert.equal(q.quarantined(k), true);
    const refused = q.admit(proceed(k), (t += 10));
    assert.equal(refused.kind, 'refused');
    assert.match(refused.kind === 'refused' ? refused.reason : '', /^quarantined: .*failed locally/);
    // After the interval one call goes through; the others are still refused while it is out.
    t += 2_000;
    const probe = q.admit(proceed(k), t);
    assert.equal(probe.kind, 'proceed');
    assert.equal(q.admit(proceed(k), t + 1).kind, 'refused');
    q.outcome(probe, 'local', undefined, t + 5);
    assert.equal(q.quarantined(k), true);
    t += 2_000;
    const next = q.admit(proceed(k), t);
    assert.equal(next.kind, 'proceed');
    q.outcome(next, 'success', undefined, t + 5);
    assert.equal(q.quarantined(k), false);
    assert.equal(q.admit(proceed(k), t + 10).kind, 'proceed');
  });

  test('endpoint failures quarantine only when the view says the fleet is being served', () => {
    const k = 'http://tiles.example.test:80';
    for (const [view, expected] of [
      [undefined, false],
      [fleetView(0, 1), false],
      [fleetView(0.6, 10), false],
      [fleetView(0, 10), true],
    ] as const) {
      const q = new Quarantine({}, NO_METRICS, quiet);
      // Twenty failures over 9 s: judged from the eighth on, past confirmMs (3 s).
      for (let i = 0; i < 20; i++) q.outcome(proceed(k), 'transient', view, i * 450);
      assert.equal(q.quarantined(k), expected, JSON.stringify(view?.fleet));
    }
  });

  test("an outage's onset does not quarantine: the fleet's figures must hold for confirmMs, the breaker closed", () => {
    const k = 'http://tiles.example.test:80';
    // Fast failures while the fleet's window still shows it served: not yet, however many.
    const q = new Quarantine({}, NO_METRICS, quiet);
    let t = 10_000;
    for (let i = 0; i < 20; i++) q.outcome(proceed(k), 'transient', fleetView(0, 10), (t += 100));
    assert.equal(q.quarantined(k), false, 'within confirmMs of the first judgement');
    // The breaker opened meanwhile (the fleet saw it too): no quarantine, and the count starts over.
    q.outcome(proceed(k), 'transient', { ...fleetView(0.05, 10), state: 'open' }, (t += 100));
    q.outcome(proceed(k), 'transient', fleetView(0, 10), (t += 2_000));
    assert.equal(q.quarantined(k), false, 'an open breaker broke the run');
    // Held for confirmMs, judged on the way: quarantined.
    for (let i = 0; i < 8; i++) q.outcome(proceed(k), 'transient', fleetView(0, 10), (t += 450));
    assert.equal(q.quarantined(k), true);
    // Calls far apart (a small share of a rate limit) are judged the same: the second one, confirmMs later.
    const slow = new Quarantine({ minSamples: 2 }, NO_METRICS, quiet);
    for (let i = 0; i < 3; i++) slow.outcome(proceed(k), 'transient', fleetView(0, 40), 1_000 + i * 8_000);
    assert.equal(slow.quarantined(k), true, 'calls 8 s apart');
    assert.match(q.list()[0]?.reason ?? '', /reporters see 0% failing/);
  });

  test('a worker that fails some calls, not most, stays in service', () => {
    const q = new Quarantine({}, NO_METRICS, quiet);
    const k = 'http://tiles.example.test:80';
    for (let i = 0; i < 40; i++) q.outcome(proceed(k), i % 3 === 0 ? 'local' : 'success', fleetView(0, 10), i);
    assert.equal(q.quarantined(k), false);
  });
});

describe('quarantine and quorum on a real entity', () => {
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  const taskQueue = uniqueTaskQueue('quarantine');
  const guards: BreakerGuard[] = [];
  // No hold after failures: it would hold each of the sick worker's 60 failing calls for up to a second (the
  // breaker stays closed for it), and this test is about what the entity and the quarantine make of them.
  const guard = (reporter: string) => {
    const g = new BreakerGuard({
      client: env.client,
      taskQueue,
      reporter,
      entityOptions: { searchAttributes: false },
      logger: quiet,
      reportIntervalMs: 100,
      holdAfterFailures: 0,
    });
    guards.push(g);
    return g;
  };
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

  test("one worker's endpoint failures do not open a new entity serving another; the entity says so; local failures quarantine the worker alone", async () => {
    const key = breakerKey(`http://tiles-${process.pid}-q.example.test`);
    const good = guard('good');
    const sick = guard('sick');
    // The healthy worker reports first, so the entity knows two reporters.
    for (let i = 0; i < 10; i++) {
      const d = await good.acquire(key);
      assert.equal(d.kind, 'proceed');
      good.release(d, { kind: 'success', latencyMs: 20 });
    }
    await good.flush();
    // The sick worker's own network fails 60 calls (as transient failures: it cannot tell), while the healthy
    // one goes on being served (a reporter silent for 5 s no longer counts as active).
    for (let i = 0; i < 60; i++) {
      const g = await good.acquire(key);
      if (g.kind !== 'refused') good.release(g, { kind: 'success', latencyMs: 20 });
      const d = await sick.acquire(key);
      if (d.kind !== 'refused') sick.release(d, { kind: 'transient', latencyMs: 5 });
    }
    await good.flush();
    await sick.flush();
    const h = env.client.workflow.getHandle(breakerWorkflowId(key));
    const status = await h.query(statusQuery);
    assert.equal(status.view.state, 'closed', JSON.stringify((await h.query(transitionsQuery)).slice(0, 2)));
    assert.equal(status.config.quorum, 2);
    assert.ok((status.counters.quorumDeclined ?? 0) >= 1);
    assert.deepEqual(
      status.loneFailers?.map((l) => l.reporter),
      ['sick'],
    );
    const log = await h.query(transitionsQuery);
    assert.ok(log.some((t) => t.reason === 'quorum-not-met' && /failures from 1 reporter/.test(t.detail)));
    assert.equal(log.filter((t) => t.to === 'open').length, 0);

    // A third worker whose resolver fails: quarantined by its own guard, the others unaffected.
    const poisoned = guard('poisoned');
    let refused: GuardDecision | null = null;
    for (let i = 0; i < 20 && !refused; i++) {
      const d = await poisoned.acquire(key);
      if (d.kind === 'refused') refused = d;
      else poisoned.release(d, { kind: 'local' });
    }
    assert.ok(refused && refused.kind === 'refused');
    assert.match(refused.reason, /^quarantined: /);
    assert.equal(poisoned.quarantine.quarantined(key), true);
    assert.equal((await good.acquire(key)).kind, 'proceed');
  });
});
