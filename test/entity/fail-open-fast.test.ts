import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { TcpProxy } from '../helpers/tcp-proxy';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

// While Temporal does not answer, only the calls that find the outage wait out a read's deadline; after them
// every call fails open at once, and reads go on in the background until one is answered.
test('while the Temporal server hangs, calls fail open without each waiting out a read; the guard reads again in the background and recovers', async (t) => {
  const env = await devServerEnv();
  const proxy = await TcpProxy.start(env.address);
  const connection = await Connection.connect({ address: proxy.address });
  const client = new Client({ connection });
  const guard = new BreakerGuard({
    client,
    taskQueue: uniqueTaskQueue('fail-open-fast'),
    reporter: 'w1',
    reportIntervalMs: 60_000,
    logger: { warn: () => {} },
  });
  const key = breakerKey('http://tiles-fast.example.test');
  const LOOPS = 10;
  try {
    const first = await guard.acquire(key);
    assert.deepEqual(
      [first.kind, first.kind === 'proceed' && first.failOpen],
      ['proceed', false],
      'the server answers: no entity, closed',
    );
    guard.release(first, { kind: 'neutral' });
    proxy.hang();
    // LOOPS workers deciding calls back to back for 8 s (four RPC deadlines) of outage.
    const decisions: GuardDecision[] = [];
    let slow = 0;
    const outageEnds = Date.now() + 8_000;
    await Promise.all(
      Array.from({ length: LOOPS }, async () => {
        while (Date.now() < outageEnds) {
          const asked = Date.now();
          const d = await guard.acquire(key);
          // Figures only (not asserted: the machine is shared): calls that took half a deadline or more.
          if (Date.now() - asked >= 1_000) slow++;
          decisions.push(d);
          if (d.kind !== 'refused') guard.release(d, { kind: 'neutral' });
          await delay(20);
        }
      }),
    );
    t.diagnostic(
      `outage: ${decisions.length} decisions, ${guard.stats.failOpen} failed open, ${guard.stats.waitedUnreachable} waited for a failed read, ${slow} took >= 1 s, ${guard.stats.viewReads} reads`,
    );
    // Calls decided on the view read just before the outage until it is older than the cache's 500 ms; from the
    // first call that failed open on, every one did.
    const failedOpen = (d: GuardDecision) => d.kind === 'proceed' && d.failOpen && d.failOpenReason === 'unreachable';
    const firstOpen = decisions.findIndex(failedOpen);
    assert.ok(firstOpen >= 0, 'calls failed open');
    assert.ok(decisions.slice(firstOpen).every(failedOpen), 'once one call failed open, every later one did');
    assert.ok(guard.stats.waitedUnreachable >= 1, 'the calls that found the outage waited for the read that failed');
    assert.ok(
      guard.stats.waitedUnreachable <= LOOPS,
      `${guard.stats.waitedUnreachable} calls waited on a failed read: only the first read's, not one per re-read`,
    );
    assert.ok(guard.stats.viewReads >= 2, 'the guard kept reading, in the background');

    // The server answers again: a background read sees it, and calls decide on the entity's view again.
    proxy.pass();
    const back = Date.now() + 60_000;
    let d: GuardDecision;
    do {
      d = await guard.acquire(key);
      if (d.kind !== 'refused') guard.release(d, { kind: 'neutral' });
      await delay(100);
    } while (d.kind === 'proceed' && d.failOpen && Date.now() < back);
    assert.deepEqual(
      [d.kind, d.kind === 'proceed' && d.failOpen],
      ['proceed', false],
      'recovered: the view decides again',
    );
  } finally {
    await guard.close();
    await connection.close();
    await proxy.close();
    await env.teardown();
  }
});
