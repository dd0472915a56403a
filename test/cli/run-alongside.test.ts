import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Worker } from '@temporalio/worker';
import { runAlongside } from '../../src/client/worker';

// `tilebreaker worker` runs a fetch worker beside its main one (src/client/worker.ts runAlongside). Stand-ins
// with the three methods it uses: what it does when the fetch worker fails while the main one still drains.

function standIn(run: () => Promise<void>): Worker & { shutdowns: number } {
  const w = {
    state: 'RUNNING',
    shutdowns: 0,
    run,
    getState() {
      return this.state;
    },
    shutdown() {
      this.shutdowns++;
      this.state = 'STOPPING';
    },
  };
  return w as unknown as Worker & { shutdowns: number };
}

test('a fetch worker that fails stops the main worker, which drains first; its error is thrown after close, never left unhandled', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const beside = standIn(() => Promise.reject(new Error('fetch worker: poll failed for good')));
    const main = standIn(() => Promise.resolve());
    let closed = 0;
    const plugin = runAlongside('test', beside, () => {
      closed++;
      return Promise.resolve();
    });
    // The main worker drains for a while after it is told to stop (500 ms): long past the tick in which an
    // unhandled rejection is reported.
    const run = plugin.runWorker!(main, async () => {
      while (main.getState() === 'RUNNING') await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 500));
    });
    await assert.rejects(run, /poll failed for good/);
    assert.equal(main.shutdowns, 1, 'the main worker was stopped');
    assert.equal(closed, 1, 'close ran once both had stopped');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, [], 'no unhandled rejection');
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

test("the main worker's own failure is thrown first, and the fetch worker is stopped", async () => {
  const beside = standIn(async () => {
    while (beside.getState() === 'RUNNING') await new Promise((r) => setTimeout(r, 10));
  });
  const main = standIn(() => Promise.resolve());
  const plugin = runAlongside('test', beside, () => Promise.resolve());
  await assert.rejects(
    plugin.runWorker!(main, () => Promise.reject(new Error('main worker failed'))),
    /main worker failed/,
  );
  assert.equal(beside.shutdowns, 1);
});
