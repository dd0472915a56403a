import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { Agent, request } from 'undici';
import { BreakerGuard, BreakerOpenedError, type GuardDecision } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId, type OutcomeKind } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery, transitionsQuery } from '../../src/messages/breaker';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

/** A tile server on 127.0.0.1 that can hang: held requests are answered never, or dropped by `drop()`. */
async function hangingServer() {
  const held = new Set<ServerResponse>();
  let hang = false;
  let received = 0;
  const server = createServer((req, res) => {
    received++;
    if (hang) {
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    get received() {
      return received;
    },
    setHang(on: boolean) {
      hang = on;
    },
    /** As a stalled server that comes back: the held connections are dropped. */
    drop() {
      for (const res of held) res.destroy();
      held.clear();
    },
    async close() {
      this.drop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('stall');
const agent = new Agent({ headersTimeout: 20_000, bodyTimeout: 20_000 });
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
  await agent.close();
  worker?.shutdown();
  await running;
  await env?.teardown();
});

/** One call the way the pipeline makes it: acquire, request with the decision's signal, release or abandon. */
async function call(
  g: BreakerGuard,
  key: string,
  url: string,
): Promise<{ decision: GuardDecision; outcome: OutcomeKind | 'shed' }> {
  const decision = await g.acquire(key);
  if (decision.kind === 'refused') return { decision, outcome: 'neutral' };
  const signal = decision.kind === 'proceed' ? decision.signal : undefined;
  const started = Date.now();
  try {
    const res = await request(url, { dispatcher: agent, ...(signal ? { signal } : {}) });
    await res.body.text();
    g.release(decision, { kind: 'success', latencyMs: Date.now() - started });
    return { decision, outcome: 'success' };
  } catch {
    if (signal?.aborted) {
      g.abandon(decision);
      return { decision, outcome: 'shed' };
    }
    g.release(decision, { kind: 'transient', latencyMs: Date.now() - started });
    return { decision, outcome: 'transient' };
  }
}

describe('a hanging endpoint', () => {
  test('calls in flight past the stall threshold trip the breaker before any timeout, and are abandoned when it opens', async () => {
    const server = await hangingServer();
    try {
      const key = breakerKey(server.url);
      const g = new BreakerGuard({
        client: env.client,
        taskQueue,
        reporter: 'stall-trip',
        entityOptions: { searchAttributes: false },
        stall: { floorMs: 500, initialMs: 500 },
      });
      guards.push(g);
      // Healthy first: the entity exists and has 30 s of successes in its window.
      for (let i = 0; i < 40; i++) await call(g, key, `${server.url}/ok`);
      await g.flush();
      server.setHang(true);
      const hangAt = Date.now();
      // One worker, 8 calls at a time, as a batch with concurrency 8 makes them: 8 samples per stall period.
      const calls = Array.from({ length: 8 }, () => call(g, key, `${server.url}/hang`));
      const results = await Promise.all(calls);
      const endedAfter = Date.now() - hangAt;
      assert.deepEqual(
        results.map((r) => r.outcome),
        Array(8).fill('shed'),
        'every hung call was abandoned when the breaker opened',
      );
      for (const r of results) {
        const signal = r.decision.kind === 'proceed' ? r.decision.signal : undefined;
        assert.ok(signal?.reason instanceof BreakerOpenedError, 'aborted with a BreakerOpenedError');
      }
      assert.ok(
        endedAfter < 10_000,
        `the hung calls ended ${endedAfter} ms after the hang began, long before the 20 s timeout`,
      );
      const handle = env.client.workflow.getHandle(breakerWorkflowId(key));
      const opened = (await handle.query(transitionsQuery)).find((t) => t.to === 'open');
      assert.ok(opened, 'the breaker opened');
      assert.equal(opened.reason, 'failure-ratio');
      assert.match(opened.detail, /the fleet had 8 calls in flight/);
      assert.ok(g.stats.stalled >= 8, `${g.stats.stalled} stall failures counted`);
      assert.equal(g.stats.shed, 8);
      const status = await handle.query(statusQuery);
      assert.ok((status.counters.stalled ?? 0) >= 8, 'the entity counts the stall failures it was told of');
      assert.equal(
        status.config.probeIntervalMs,
        5_000,
        'a new entity probes every 5 s after a failed probe (min(cooldownMs, 5 s))',
      );
      // Refused now, without a request.
      const before = server.received;
      assert.equal((await g.acquire(key)).kind, 'refused');
      assert.equal(server.received, before);
    } finally {
      await server.close();
    }
  });

  test('a call counted while it stalled is not counted again when its connection drops as the server comes back', async () => {
    const server = await hangingServer();
    try {
      const key = breakerKey(server.url);
      // Floors that 8 calls cannot reach: this test is about what is counted, not about a trip.
      const g = new BreakerGuard({
        client: env.client,
        taskQueue,
        reporter: 'stall-burst',
        config: { volumeFloor: null },
        entityOptions: { searchAttributes: false },
        stall: { floorMs: 2_000, initialMs: 2_000 },
      });
      guards.push(g);
      for (let i = 0; i < 10; i++) await call(g, key, `${server.url}/ok`);
      server.setHang(true);
      const calls = Array.from({ length: 8 }, () => call(g, key, `${server.url}/hang`));
      // Past one stall period (2 s), well before the second (4 s): each hung call is counted once.
      await new Promise((r) => setTimeout(r, 2_800));
      server.setHang(false);
      server.drop();
      const results = await Promise.all(calls);
      assert.deepEqual(
        results.map((r) => r.outcome),
        Array(8).fill('transient'),
      );
      // One quick failure that did not stall: counted as usual.
      const decision = await g.acquire(key);
      g.release(decision, { kind: 'transient', latencyMs: 3 });
      await g.flush();
      const status = await env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery);
      assert.equal(g.stats.stalled, 8);
      assert.equal(
        status.figures.transient,
        9,
        '8 stall failures and the quick one; the 8 dropped connections are not counted again',
      );
      assert.equal(status.figures.successes, 10);
      assert.equal(status.view.state, 'closed');
    } finally {
      await server.close();
    }
  });
});
