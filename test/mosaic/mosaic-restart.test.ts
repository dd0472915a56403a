import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { localBinaries } from '../../src/client/local-server';
import { withStartRetries } from '../../src/client/server-start';
import { startMosaic } from '../../src/client/mosaics';
import { startDemoTileServer } from '../../src/demo/tile-server';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest } from '../helpers/mosaic';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-restart-'));
const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

/** A dev server with its state in a file, on a fixed port, so it can be stopped and started again. */
async function devServer(port: number | undefined, dbFilename: string): Promise<TestWorkflowEnvironment> {
  const { cli } = localBinaries();
  return withStartRetries(() =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path', path: cli } } : {}),
        ip: '127.0.0.1',
        ...(port ? { port } : {}),
        dbFilename,
        searchAttributes: BREAKER_SEARCH_ATTRIBUTES,
      },
    }),
  );
}

/** `tilebreaker worker` in its own process, so it can be SIGKILLed. */
function workerProcess(address: string, taskQueue: string): ChildProcess {
  const child = spawn(process.execPath, [path.join(__dirname, '..', '..', 'src', 'cli', 'main.js'), 'worker'], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: address,
      TILEBREAKER_TASK_QUEUE: taskQueue,
      TILEBREAKER_OUTPUT_DIR: tmpdir(),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4_000)));
  child.on('exit', (code, signal) => {
    if (code && code !== 0) console.error(`worker exited ${code} ${signal ?? ''}: ${err}`);
  });
  cleanups.push(() => {
    child.kill('SIGKILL');
  });
  return child;
}

test('a worker SIGKILLed mid-mosaic and a dev server restarted mid-run: the mosaic finishes with every tile, none fetched twice beyond the batches in flight', async () => {
  const db = path.join(dir, 'temporal.sqlite');
  let env = await devServer(undefined, db);
  const address = env.address;
  const port = Number(address.split(':').pop());
  cleanups.push(() => env.teardown());
  const server = await startDemoTileServer({ latencyMs: 120 });
  cleanups.push(() => server.close());
  const original = server.stats;
  const taskQueue = `restart-${process.pid}`;
  let worker = workerProcess(address, taskQueue);
  const request = {
    source: { type: 'xyz' as const, url: server.template, concurrency: 2 },
    sourceName: 'demo',
    bbox: [2.0, 42.0, 19.5, 49.9] as [number, number, number, number],
    zoom: 8,
    output: path.join(dir, 'restart.tif'),
    batchSize: 16,
    parallelBatches: 2,
  };
  const handle = await startMosaic(env.client, taskQueue, request, `mosaic-restart-${process.pid}`);
  // Patience, not a target: a worker process starts slowly on a loaded machine.
  for (let i = 0; i < 1_200 && original.requests < 40; i++) await delay(50);
  assert.ok(original.requests >= 40, 'the mosaic got going');
  worker.kill('SIGKILL');
  await new Promise((r) => worker.once('exit', r));
  const atKill = original.requests;

  // The server goes down and comes back on the same port and file: the run's state must survive.
  await env.teardown();
  env = await devServer(port, db);
  cleanups.push(() => env.teardown());
  worker = workerProcess(address, taskQueue);
  const result = (await env.client.workflow.getHandle(handle.workflowId).result()) as MosaicResult;
  worker.kill('SIGTERM');

  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.equal(m.counts.ok, 130, JSON.stringify(m.counts));
  // Tiles served twice: at most those of the batches in flight when the worker died (a retried batch resumes
  // from its last heartbeat, so in practice only the tiles of its last second).
  assert.ok(
    original.repeats <= request.batchSize * request.parallelBatches,
    `${original.repeats} tiles fetched twice (killed at ${atKill} requests)`,
  );
  console.log(
    `restart: killed at ${atKill} requests; ${original.requests} requests for 130 tiles, ${original.repeats} repeated`,
  );
});
