import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { BreakerGuard } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { localBinaries } from '../../src/client/local-server';
import { withStartRetries } from '../../src/client/server-start';
import { createWorker } from '../../src/client/worker';
import { uniqueTaskQueue } from '../helpers/temporal-env';

// Reports that the server refuses while reads still work: here the server's own limit on signals per workflow
// run (set low), as a server rejecting signals (rate limits, that limit) would. The entity stops hearing this
// worker: its calls count as failing open, and a report delivered again (to a new run) ends it.
test('reports the server refuses are dropped and counted; after 3 in a row calls count as failing open (reports-dropped) until one is delivered', async () => {
  const { cli } = localBinaries();
  const env = await withStartRetries(() =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path' as const, path: cli } } : {}),
        ip: '127.0.0.1',
        extraArgs: ['--dynamic-config-value', 'history.maximumSignalsPerExecution=4'],
      },
    }),
  );
  const taskQueue = uniqueTaskQueue('dropped');
  const worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  const running = worker.run();
  const warnings: string[] = [];
  const guard = new BreakerGuard({
    client: env.client,
    taskQueue,
    reporter: 'w1',
    reportIntervalMs: 60_000,
    entityOptions: { searchAttributes: false },
    logger: { warn: (m) => warnings.push(m) },
  });
  const key = breakerKey(`http://tiles-dropped-${process.pid}.example.test`);
  const report = async () => {
    const d = await guard.acquire(key);
    guard.release(d, { kind: 'success', latencyMs: 5 });
    await guard.flush();
    return d;
  };
  try {
    for (let i = 0; i < 4; i++) await report();
    assert.equal(guard.stats.reportsSent, 4, 'the first 4 signals are taken');
    assert.equal(guard.stats.reportErrors, 0);
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await report());
    assert.equal(guard.stats.reportErrors, 4, 'the next 4 are refused by the server: dropped and counted');
    assert.deepEqual(
      decisions.map((d) => (d.kind === 'proceed' ? (d.failOpenReason ?? 'decided') : d.kind)),
      ['decided', 'decided', 'decided', 'reports-dropped'],
      'the view decides; from the 3rd drop in a row on, the calls let through count as failing open',
    );
    assert.equal(guard.stats.blindFailOpen, 1);
    assert.ok(warnings.some((m) => /reports to the breaker entity keep failing/.test(m)));
    // A new run (the old one terminated) takes reports again: the first delivered ends it.
    await env.client.workflow.getHandle(breakerWorkflowId(key)).terminate('test: a new run');
    await report(); // the plain signal finds no run: signal-with-start starts one
    const after = await guard.acquire(key);
    assert.deepEqual([after.kind, after.kind === 'proceed' && after.failOpen], ['proceed', false]);
    assert.ok(warnings.some((m) => /reports reach the breaker entity again/.test(m)));
  } finally {
    await guard.close();
    worker.shutdown();
    await running;
    await env.teardown();
  }
});
