import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { createWorker } from '../../src/client/worker';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { reportSignal, statusQuery, viewQuery } from '../../src/messages/breaker';
import { startEntity } from '../helpers/entity';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
const workers: { worker: Worker; running: Promise<void> }[] = [];
const taskQueue = uniqueTaskQueue('entity-dev');
// A second namespace on the same server, without the search attributes registered.
const bare = `bare-${process.pid}`;

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES, [bare]);
  // The dev server registers its attributes in every namespace: take them out of the bare one.
  await env.connection.operatorService.removeSearchAttributes({
    namespace: bare,
    searchAttributes: BREAKER_SEARCH_ATTRIBUTES.map((k) => k.name),
  });
  for (const namespace of ['default', bare]) {
    const client = new Client({ connection: env.connection, namespace });
    const worker = await createWorker({ connection: env.nativeConnection, client, namespace, taskQueue });
    workers.push({ worker, running: worker.run() });
  }
});
after(async () => {
  for (const w of workers) w.worker.shutdown();
  await Promise.all(workers.map((w) => w.running));
  await env?.teardown();
});

async function listByState(client: Client, query: string): Promise<string[]> {
  for (let i = 0; i < 50; i++) {
    const ids: string[] = [];
    for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
    if (ids.length) return ids;
    await delay(200);
  }
  return [];
}

test('with the search attributes registered, an open breaker is listed by BreakerState', async () => {
  const key = `http://open-${process.pid}.example.test:80`;
  const h = await startEntity(env.client, taskQueue, { key }, { reporter: 'w1', counts: { transient: 25 } });
  assert.equal((await h.query(viewQuery)).state, 'open');
  // The check is an activity the entity runs as it starts: wait for its answer.
  let checked: boolean | null = null;
  for (let i = 0; i < 50 && checked === null; i++) {
    checked = (await h.query(statusQuery)).searchAttributes;
    if (checked === null) await delay(100);
  }
  assert.equal(checked, true);
  assert.deepEqual(await listByState(env.client, `BreakerState = "open" AND BreakerKey = "${key}"`), [
    `breaker/${key}`,
  ]);
});

test('in a namespace without them, the entity notices, skips them, and still works', async () => {
  const client = new Client({ connection: env.connection, namespace: bare });
  const key = `http://bare-${process.pid}.example.test:80`;
  const h = await startEntity(client, taskQueue, { key }, { reporter: 'w1', counts: { success: 5 } });
  await h.signal(reportSignal, { reporter: 'w2', counts: { transient: 25 } });
  // Two reporters failing: a new entity's quorum (2) is met.
  await h.signal(reportSignal, { reporter: 'w1', counts: { transient: 25 } });
  let status = await h.query(statusQuery);
  for (let i = 0; i < 50 && (status.view.state !== 'open' || status.searchAttributes === null); i++) {
    await delay(100);
    status = await h.query(statusQuery);
  }
  assert.equal(status.view.state, 'open');
  assert.equal(status.counters.reports, 3);
  assert.equal(status.searchAttributes, false, 'the check found them missing');
  const desc = await h.describe();
  assert.equal(desc.status.name, 'RUNNING', 'no workflow task failed on an unregistered attribute');
});
