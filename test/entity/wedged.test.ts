import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { MetricCounter, MetricGauge, MetricHistogram, MetricMeter, MetricTags } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { WorkerMetrics } from '../../src/activities/metrics/worker-metrics';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { adminSignal } from '../../src/messages/breaker';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

// A wedged entity: Describe still shows it running with its last memo, but its workflow tasks are not done
// (here: nobody polls its task queue, as when its workers are gone or every task fails). The guard must not
// keep deciding on that view.

let env: TestWorkflowEnvironment;
before(async () => {
  env = await devServerEnv();
});
after(async () => {
  await env?.teardown();
});

/** Counters summed by name and tags; gauges and histograms ignored. */
class CountingMeter implements MetricMeter {
  readonly counts = new Map<string, number>();
  createCounter(name: string): MetricCounter {
    const add = (value: number, tags: MetricTags = {}) =>
      this.counts.set(this.id(name, tags), (this.counts.get(this.id(name, tags)) ?? 0) + value);
    return { name, kind: 'counter', valueType: 'int', add, withTags: () => assert.fail('not used') };
  }
  createGauge(name: string): MetricGauge {
    return { name, kind: 'gauge', valueType: 'int', set: () => {}, withTags: () => assert.fail('not used') };
  }
  createHistogram(name: string): MetricHistogram {
    return { name, kind: 'histogram', valueType: 'int', record: () => {}, withTags: () => assert.fail('not used') };
  }
  withTags(): MetricMeter {
    return assert.fail('not used');
  }
  get(name: string, tags: MetricTags): number {
    return this.counts.get(this.id(name, tags)) ?? 0;
  }
  private id(name: string, tags: MetricTags): string {
    return `${name}${JSON.stringify(Object.entries(tags).sort())}`;
  }
}

async function startWorker(taskQueue: string): Promise<{ worker: Worker; running: Promise<void> }> {
  const worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  return { worker, running: worker.run() };
}

/** Decides calls to `key` (releasing each as neutral) until one satisfies `ok`; fails after `ms`. */
async function decideUntil(
  guard: BreakerGuard,
  key: string,
  ok: (d: GuardDecision) => boolean,
  ms: number,
): Promise<{ decision: GuardDecision; seen: GuardDecision[] }> {
  const seen: GuardDecision[] = [];
  const end = Date.now() + ms;
  for (;;) {
    const decision = await guard.acquire(key);
    seen.push(decision);
    if (decision.kind !== 'refused') guard.release(decision, { kind: 'neutral' });
    if (ok(decision)) return { decision, seen };
    if (Date.now() > end) assert.fail(`no decision matched within ${ms} ms; the last: ${JSON.stringify(decision)}`);
    await delay(100);
  }
}

const wedgedFailOpen = (d: GuardDecision) => d.kind === 'proceed' && d.failOpen && d.failOpenReason === 'wedged';

test('an open breaker whose workers are gone: past its cooldown and the grace the guard fails open (wedged, counted, logged once), and recovers when a worker polls again', async () => {
  const taskQueue = uniqueTaskQueue('wedged');
  const key = breakerKey(`http://tiles-wedged-${process.pid}.example.test`);
  const meter = new CountingMeter();
  const warnings: string[] = [];
  const guard = new BreakerGuard({
    client: env.client,
    taskQueue,
    reporter: 'w1',
    entityOptions: { searchAttributes: false },
    cacheTtlMs: 200,
    rpcTimeoutMs: 1_000,
    probeSpreadMs: 0,
    wedgeGraceMs: 2_000,
    logger: { warn: (message) => warnings.push(message) },
    metrics: new WorkerMetrics(() => meter),
  });
  let w = await startWorker(taskQueue);
  try {
    // The entity exists (a report created it), then an operator opens it for 3 s.
    guard.release(await guard.acquire(key), { kind: 'success', latencyMs: 5 });
    await guard.flush();
    await env.client.workflow
      .getHandle(breakerWorkflowId(key))
      .signal(adminSignal, { action: 'force-open', durationMs: 3_000, actor: 'test' });
    const open = await decideUntil(guard, key, (d) => d.kind === 'refused' && d.state === 'forced-open', 10_000);
    assert.equal(open.decision.kind, 'refused');
    // Its only worker stops: the timer that ends the force-open fires, and nobody does the task it schedules.
    w.worker.shutdown();
    await w.running;
    const wedged = await decideUntil(guard, key, wedgedFailOpen, 60_000);
    assert.ok(
      wedged.seen.slice(0, -1).every((d) => !(d.kind === 'proceed' && d.failOpen)),
      `nothing failed open before the wedge was found: ${JSON.stringify(wedged.seen.map((d) => d.kind))}`,
    );
    // While it stays wedged every call fails open, as one episode.
    for (let i = 0; i < 3; i++) assert.ok(wedgedFailOpen(await guard.acquire(key)), 'still wedged: fails open');
    assert.equal(guard.stats.wedged, 1, 'one episode');
    assert.ok(guard.stats.wedgedFailOpen >= 4, `${guard.stats.wedgedFailOpen} wedged fail-opens`);
    assert.equal(meter.get('tilebreaker_guard_entity_wedged', { endpoint: key }), 1);
    assert.equal(
      meter.get('tilebreaker_guard_fail_open', { endpoint: key, reason: 'wedged' }),
      guard.stats.wedgedFailOpen,
    );
    assert.equal(warnings.filter((m) => /wedged/.test(m)).length, 1, `logged once: ${JSON.stringify(warnings)}`);

    // A worker polls the queue again: the entity does its pending task (the force-open ends), and the guard
    // decides on its view again.
    w = await startWorker(taskQueue);
    const back = await decideUntil(guard, key, (d) => !(d.kind === 'proceed' && d.failOpen), 60_000);
    assert.notEqual(back.decision.kind === 'proceed' && back.decision.failOpen, true);
    assert.equal(guard.stats.wedged, 1, 'the episode ended; no new one');
    assert.equal(
      warnings.filter((m) => /moving again/.test(m)).length,
      1,
      `recovery logged once: ${JSON.stringify(warnings)}`,
    );
    const view = await guard.view(key);
    assert.ok(view && view.state !== 'forced-open', `the entity moved on: ${JSON.stringify(view)}`);
  } finally {
    await guard.close();
    w.worker.shutdown();
    await w.running;
  }
});

test('an entity started on a task queue nobody polls (its first task never done): the guard fails open as wedged after the grace', async () => {
  const key = breakerKey(`http://tiles-unpolled-${process.pid}.example.test`);
  const guard = new BreakerGuard({
    client: env.client,
    taskQueue: uniqueTaskQueue('unpolled'),
    reporter: 'w1',
    entityOptions: { searchAttributes: false },
    cacheTtlMs: 200,
    rpcTimeoutMs: 1_000,
    wedgeGraceMs: 2_000,
    logger: { warn: () => {} },
  });
  try {
    // The first report starts the entity (signal-with-start): Temporal accepts it, but no worker takes its task.
    const first = await guard.acquire(key);
    assert.deepEqual([first.kind, first.kind === 'proceed' && first.failOpen], ['proceed', false]);
    guard.release(first, { kind: 'transient', latencyMs: 5 });
    await guard.flush();
    assert.equal(guard.stats.reportsSent, 1);
    const wedged = await decideUntil(guard, key, wedgedFailOpen, 60_000);
    assert.equal(wedged.decision.kind, 'proceed');
    assert.equal(guard.stats.wedged, 1);
  } finally {
    await guard.close();
    await env.client.workflow
      .getHandle(breakerWorkflowId(key))
      .terminate('test over')
      .catch(() => {});
  }
});
