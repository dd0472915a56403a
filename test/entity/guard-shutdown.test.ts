import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

// A worker stopped while Temporal is slow or gone (a rolling deploy) closes its guard, then its connection.
// A report still in the client's retries (UNAVAILABLE answers, retried on the client's own timer) must not
// outlive the guard: its next retry would start a call on the closed connection, which throws
// "Channel has been shut down" from a timer, uncaught, and the process dies.
test('closing the guard while a report is in the client retries waits for it: the report is dropped and counted, nothing is thrown', async () => {
  const env = await devServerEnv();
  const connection = await Connection.connect({ address: env.address });
  const client = new Client({ connection });
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  const guard = new BreakerGuard({
    client,
    taskQueue: uniqueTaskQueue('shutdown'),
    reporter: 'w1',
    reportIntervalMs: 100,
    rpcTimeoutMs: 2_000,
    cacheTtlMs: 60_000,
    logger: { warn: () => {} },
  });
  const key = breakerKey('http://tiles-shutdown.example.test');
  let closed = false;
  try {
    const decision = await guard.acquire(key); // the server answers: no entity yet, closed
    assert.equal(decision.kind, 'proceed');
    await env.teardown(); // the Temporal server stops
    guard.release(decision, { kind: 'success', latencyMs: 5 });
    // The report goes at the next interval (100 ms); the client retries its UNAVAILABLE answers until the RPC
    // deadline (2 s). Close in the middle of that.
    await delay(500);
    await guard.close();
    await connection.close();
    closed = true;
    // Longer than any retry delay the client could still have pending (5 s at most, plus jitter).
    await delay(6_500);
    assert.deepEqual(uncaught.map(String), [], 'no error thrown after the connection closed');
    assert.equal(guard.stats.reportErrors, 1, 'the report that could not be delivered was dropped and counted');
  } finally {
    process.off('uncaughtException', onUncaught);
    if (!closed) {
      await guard.close();
      await connection.close();
    }
  }
});
