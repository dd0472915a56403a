import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import type { Client } from '@temporalio/client';
import { createActivityRuntime } from '../../src/activities';
import { processIdentity } from '../../src/activities/guard';

test('reporter ids differ between processes that share a pid (container replicas are all pid 1)', () => {
  // Two guards in one process stand for two replicas with the same pid and, with host networking, one host name.
  const a = processIdentity('worker');
  const b = processIdentity('worker');
  assert.notEqual(a, b);
  for (const id of [a, b]) {
    assert.ok(id.startsWith(`worker-${process.pid}@${hostname()}-`), id);
    assert.match(id, /-[0-9a-f]{8}$/);
  }
});

test("a worker's guard reports under such an id: two runtimes in one process (two replicas, one pid) are two reporters", async () => {
  const client = {} as Client; // nothing is sent: the runtimes are built and closed
  const a = createActivityRuntime({ client, taskQueue: 'q' });
  const b = createActivityRuntime({ client, taskQueue: 'q' });
  try {
    assert.notEqual(a.identity, b.identity);
    assert.match(a.identity, new RegExp(`^worker-${process.pid}@`));
  } finally {
    await a.close();
    await b.close();
  }
});
