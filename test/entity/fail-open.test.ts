import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey } from '../../src/breaker';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

test('when the Temporal server is down the guard fails open, counts it and logs it once per interval', async () => {
  const env = await devServerEnv();
  const warnings: { message: string; meta?: Record<string, unknown> }[] = [];
  const guard = new BreakerGuard({
    client: env.client,
    taskQueue: uniqueTaskQueue('fail-open'),
    reporter: 'w1',
    rpcTimeoutMs: 500,
    cacheTtlMs: 60_000,
    reportIntervalMs: 60_000,
    logger: { warn: (message, meta) => warnings.push({ message, ...(meta ? { meta } : {}) }) },
  });
  const key = breakerKey('http://tiles.example.test');
  try {
    assert.equal((await guard.acquire(key)).kind, 'proceed');
    assert.equal(guard.stats.failOpen, 0);
    // Forget the cached "no entity yet" view, so the next call must reach the server.
    (guard as unknown as { keys: Map<string, { fetchedAt: number }> }).keys.get(key)!.fetchedAt = 0;
    await env.teardown(); // the dev server process is stopped
    const started = Date.now();
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await guard.acquire(key));
    assert.ok(
      decisions.every((d) => d.kind === 'proceed' && d.failOpen),
      JSON.stringify(decisions),
    );
    assert.ok(
      Date.now() - started < 500 + 1_000,
      `5 decisions took ${Date.now() - started} ms: after one failed read, the guard fails open at once`,
    );
    assert.equal(guard.stats.failOpen, 5);
    assert.equal(warnings.length, 1, 'logged once for the interval, not once per call');
    assert.match(warnings[0]!.message, /unreachable; failing open/);
    // Reports that cannot be delivered are dropped and counted, never thrown.
    guard.release(decisions[0]!, { kind: 'transient' });
    await guard.flush();
    assert.equal(guard.stats.reportErrors, 1);
  } finally {
    await guard.close();
  }
});
