import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId, namedBreakerKey } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery } from '../../src/messages/breaker';
import { breakerEntityWorkflow } from '../../src/workflows/breaker-entity';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('guard');
let n = 0;
const host = () => `http://tiles-${process.pid}-${++n}.example.test`;
const guards: BreakerGuard[] = [];
const guard = (reporter: string, extra: Partial<ConstructorParameters<typeof BreakerGuard>[0]> = {}) => {
  const g = new BreakerGuard({
    client: env.client,
    taskQueue,
    reporter,
    entityOptions: { searchAttributes: false },
    ...extra,
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

/** Polls `fn` until `ok` holds (or `ms` pass); an entity not created yet reads as undefined. */
async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch((err: unknown) => {
      if (err instanceof Error && err.name === 'WorkflowNotFoundError') return undefined;
      throw err;
    });
    if ((v !== undefined && ok(v)) || Date.now() >= end) {
      if (v === undefined) assert.fail('the entity was never created');
      return v;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the guard', () => {
  test('a bad configuration is refused when the guard is made, naming the field', () => {
    assert.throws(() => guard('w', { config: { failureRatio: 2 } }), /failureRatio: .*\(got 2\)/);
  });

  test('a burst of failures from concurrent calls is gathered into a few reports, not one per failure', async () => {
    const key = breakerKey(host());
    // volumeFloor null: the floors must not follow the 10 calls in flight, this test needs no trip.
    const g = guard('bursty', { reportIntervalMs: 60_000, config: { minSamples: 1_000_000, volumeFloor: null } });
    // 10 calls in flight at a time, 100 failures spread over a few hundred ms.
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        for (let i = 0; i < 10; i++) {
          g.release(await g.acquire(key), { kind: 'transient', latencyMs: 2 });
          await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    await g.flush();
    const status = await env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery);
    assert.equal(status.figures.transient, 100, 'every failure was reported');
    assert.ok(g.stats.reportsSent <= 15, `${g.stats.reportsSent} reports for 100 failures`);
  });

  test('a process that keeps failing sends about two reports a second, and its calls pause on them', async () => {
    const key = breakerKey(host());
    const g = guard('sequential', { reportIntervalMs: 60_000, config: { minSamples: 1_000_000 } });
    const started = Date.now();
    for (let i = 0; i < 6; i++) g.release(await g.acquire(key), { kind: 'transient' });
    await g.acquire(key);
    // The first failure goes after 50 ms; while failures keep coming they gather for 500 ms, and each call
    // waits up to 200 ms on the report being gathered: the process slows itself down.
    assert.ok(Date.now() - started >= 850, `6 failures took ${Date.now() - started} ms`);
    assert.ok(g.stats.reportsSent <= 3, `${g.stats.reportsSent} reports for 6 failures`);
  });

  test('after its probe fails, the same process does not call the re-opened endpoint', async () => {
    const key = breakerKey(host());
    const config = { cooldownMs: 1_000, cooldownJitter: 0 };
    const g = guard('prober', { config });
    for (let i = 0; i < 20; i++) g.release(await g.acquire(key), { kind: 'transient' });
    await until(
      () => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery),
      (s) => s.view.state === 'open',
    );
    await env.sleep(1_500);
    await new Promise((r) => setTimeout(r, 1_100));
    const probe = await g.acquire(key);
    assert.equal(probe.kind, 'probe');
    g.release(probe, { kind: 'transient' });
    for (let i = 0; i < 4; i++) assert.equal((await g.acquire(key)).kind, 'refused');
  });

  test("a 429's Retry-After holds this process's next calls at once: a short wait is waited out, a long one refused with its end (capped)", async () => {
    const key = breakerKey(host());
    // Nothing reaches the entity in this test: only the process's own pause is at work.
    const g = guard('paced', { reportIntervalMs: 60_000, failureFlushMs: 60_000, maxPaceWaitMs: 1_000 });
    const first = await g.acquire(key);
    g.release(first, { kind: 'rate-limited', latencyMs: 3, retryAfterMs: 300 });
    const started = Date.now();
    const next = await g.acquire(key);
    assert.equal(next.kind, 'proceed');
    assert.ok(Date.now() - started >= 290, `the next call went ${Date.now() - started} ms after the 429 asked for 300`);
    assert.equal(g.stats.paced, 1);
    g.release(next, { kind: 'rate-limited', latencyMs: 3, retryAfterMs: 5_000 });
    const refused = await g.acquire(key);
    assert.ok(refused.kind === 'refused' && refused.state === 'closed', JSON.stringify(refused));
    assert.ok(
      refused.retryAfterMs !== null && refused.retryAfterMs > 4_000 && refused.retryAfterMs <= 5_000,
      JSON.stringify(refused),
    );
    assert.match(refused.reason, /^paced: the endpoint asked to wait \(Retry-After\) until /);
    // A server asking for a day holds this process no longer than the policy's longest cooldown (288 s).
    const other = breakerKey(host());
    g.release(await g.acquire(other), { kind: 'rate-limited', retryAfterMs: 86_400_000 });
    const capped = await g.acquire(other);
    assert.ok(
      capped.kind === 'refused' &&
        capped.retryAfterMs !== null &&
        capped.retryAfterMs <= 288_000 &&
        capped.retryAfterMs > 287_000,
      JSON.stringify(capped),
    );
  });

  test('an entity terminated while open and started afresh is a new, closed breaker, even before its first task (a new run chain)', async () => {
    const key = breakerKey(host());
    const id = breakerWorkflowId(key);
    const g = guard('restarted', { cacheTtlMs: 50, config: { cooldownMs: 3_600_000 } });
    for (let i = 0; i < 20; i++) g.release(await g.acquire(key), { kind: 'transient' });
    await g.flush();
    await until(
      () => g.view(key),
      (v) => v?.state === 'open',
    );
    // A fresh run, held before its first task (a queue nobody polls): running, young, no memo, a new first run
    // id. (A continue-as-new's next run shares its first run id and keeps the last view: view-cache.test.ts.)
    await env.client.workflow.getHandle(id).terminate('test: an operator ends the entity');
    await env.client.workflow.start(breakerEntityWorkflow, {
      workflowId: id,
      taskQueue: `${taskQueue}-nobody`,
      args: [{ key, options: { searchAttributes: false } }],
    });
    await new Promise((r) => setTimeout(r, 100));
    const d = await g.acquire(key);
    assert.deepEqual([d.kind, d.kind !== 'probe' && d.state], ['proceed', 'closed'], `decided as ${JSON.stringify(d)}`);
    g.abandon(d);
    await env.client.workflow.getHandle(id).terminate('test over');
  });

  test('with no entity yet, calls proceed (closed)', async () => {
    const g = guard('w1');
    const d = await g.acquire(breakerKey(host()));
    assert.deepEqual([d.kind, d.kind === 'proceed' && d.failOpen], ['proceed', false]);
  });

  test('a healthy steady state sends one report per interval, not one per call', async () => {
    const key = breakerKey(host());
    const g = guard('w1', { reportIntervalMs: 60_000 });
    for (let i = 0; i < 200; i++) {
      const d = await g.acquire(key);
      g.release(d, { kind: 'success', latencyMs: 20 });
    }
    assert.equal(g.stats.reportsSent, 0, 'nothing sent before the interval');
    assert.ok(g.stats.viewReads <= 2, `${g.stats.viewReads} state reads for 200 calls (cached view)`);
    await g.flush();
    assert.equal(g.stats.reportsSent, 1);
    const status = await env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery);
    assert.equal(status.figures.successes, 200);
    assert.equal(status.figures.latencySamples, 200);
  });

  test('failures are reported at once, not at the next interval, and trip the breaker for every guard', async () => {
    const key = breakerKey(host());
    const a = guard('worker-a', { reportIntervalMs: 60_000 });
    const b = guard('worker-b', { reportIntervalMs: 60_000 });
    assert.equal((await b.acquire(key)).kind, 'proceed');
    for (let i = 0; i < 20; i++) a.release(await a.acquire(key), { kind: 'transient', latencyMs: 5 });
    // No flush called: the failures went on their own.
    const status = await until(
      () => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery),
      (s) => s.view.state === 'open',
    );
    assert.equal(status.view.state, 'open');
    // b's cached view is at most cacheTtlMs old: within a second it refuses without touching the network.
    const refused = await until(
      () => b.acquire(key),
      (d) => d.kind === 'refused',
      2_000,
    );
    assert.equal(refused.kind, 'refused');
    assert.ok(refused.kind === 'refused' && refused.retryAfterMs! > 0);
  });

  test('a named key (a call with no URL to key on) is a breaker like any other: failures open it for every guard', async () => {
    const key = namedBreakerKey(`geocoder:primary-${process.pid}-${++n}`);
    const a = guard('geo-a');
    const b = guard('geo-b');
    for (let i = 0; i < 20; i++) a.release(await a.acquire(key), { kind: 'transient', latencyMs: 5 });
    const status = await until(
      () => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery),
      (s) => s.view.state === 'open',
    );
    assert.equal(status.key, key);
    assert.equal(
      (
        await until(
          () => b.acquire(key),
          (d) => d.kind === 'refused',
          2_000,
        )
      ).kind,
      'refused',
    );
  });

  test('two pipelines whose URLs differ only in path share one breaker', async () => {
    const origin = host();
    const roads = breakerKey(`${origin}/roads/{z}/{x}/{y}.png`);
    const aerial = breakerKey(`${origin.toUpperCase().replace('HTTP', 'http')}:80/aerial/wmts?layer=x`);
    assert.equal(roads, aerial);
    const p1 = guard('pipeline-roads');
    const p2 = guard('pipeline-aerial');
    for (let i = 0; i < 20; i++) p1.release(await p1.acquire(roads), { kind: 'service-exception' });
    const d = await until(
      () => p2.acquire(aerial),
      (x) => x.kind === 'refused',
    );
    assert.equal(d.kind, 'refused');
  });

  test("half-open: the fleet's probe requests are spread, so the processes that come later find the token out and never ask", async () => {
    const key = breakerKey(host());
    const config = { cooldownMs: 1_000, cooldownJitter: 0, probesToClose: 1, rampMs: 0 };
    // Six processes, their shares of a 3 s spread fixed: 0, 0.5, 1 ... 2.5 s.
    const gs = Array.from({ length: 6 }, (_, i) =>
      guard(`spread${i}`, { config, probeSpreadMs: 3_000, probeJitter: i / 6 }),
    );
    for (let i = 0; i < 20; i++) gs[0]!.release(await gs[0]!.acquire(key), { kind: 'transient' });
    const handle = env.client.workflow.getHandle(breakerWorkflowId(key));
    await until(
      () => handle.query(statusQuery),
      (s) => s.view.state === 'open',
    );
    await env.sleep(1_500);
    await new Promise((r) => setTimeout(r, 1_100)); // let every cached view expire
    const started = Date.now();
    const decided: number[] = [];
    const decisions = await Promise.all(
      gs.map(async (g, i) => {
        const d = await g.acquire(key);
        decided[i] = Date.now() - started;
        return d;
      }),
    );
    assert.deepEqual(
      decisions.map((d) => d.kind),
      ['probe', 'refused', 'refused', 'refused', 'refused', 'refused'],
    );
    // One request reached the entity, not six at the same instant: the others waited their share, then saw the token out.
    assert.equal((await handle.query(statusQuery)).counters.probeRequests, 1);
    for (let i = 1; i < 6; i++) assert.ok(decided[i]! >= i * 500 - 50, `process ${i} decided after ${decided[i]} ms`);
    gs[0]!.release(decisions[0]!, { kind: 'success', latencyMs: 10 });
  });

  test('a probe spread or share out of range is refused when the guard is made, naming the option', () => {
    assert.throws(() => guard('w', { probeJitter: 1 }), /probeJitter must be in \[0, 1\) \(got 1\)/);
    assert.throws(() => guard('w', { probeSpreadMs: -5 }), /probeSpreadMs must be a number of ms >= 0 \(got -5\)/);
  });

  test('half-open: one guard gets the probe, the others are refused; its success closes the breaker', async () => {
    const key = breakerKey(host());
    const config = { cooldownMs: 1_000, cooldownJitter: 0, probesToClose: 1, rampMs: 0 };
    const gs = [guard('g0', { config }), guard('g1', { config }), guard('g2', { config })];
    for (let i = 0; i < 20; i++) gs[0]!.release(await gs[0]!.acquire(key), { kind: 'transient' });
    await until(
      () => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery),
      (s) => s.view.state === 'open',
    );
    await env.sleep(1_500);
    await new Promise((r) => setTimeout(r, 1_100)); // let every cached view expire
    const decisions: GuardDecision[] = await Promise.all(gs.map((g) => g.acquire(key)));
    const probes = decisions.filter((d) => d.kind === 'probe');
    assert.equal(probes.length, 1, JSON.stringify(decisions));
    assert.equal(decisions.filter((d) => d.kind === 'refused').length, 2);
    // A guard that reads the view while the token is out refuses locally, without asking the entity.
    const handle = env.client.workflow.getHandle(breakerWorkflowId(key));
    const requestsBefore = (await handle.query(statusQuery)).counters.probeRequests;
    const late = await guard('g3', { config }).acquire(key);
    assert.equal(late.kind, 'refused');
    assert.equal((await handle.query(statusQuery)).counters.probeRequests, requestsBefore);
    const holder = gs[decisions.indexOf(probes[0]!)]!;
    holder.release(probes[0]!, { kind: 'success', latencyMs: 10 });
    const status = await until(
      () => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery),
      (s) => s.view.state === 'closed',
    );
    assert.equal(status.view.state, 'closed');
  });
});
