import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { localBinaries } from '../../src/client/local-server';
import { startMosaic } from '../../src/client/mosaics';
import { withStartRetries } from '../../src/client/server-start';
import { throughOutages, TemporalUnreachableError } from '../../src/client/server-wait';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-watch-restart-'));
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

/** A gRPC error as the client throws it: a status code in the causes. */
const grpcError = (code: number, message: string) =>
  Object.assign(new Error('Unexpected error while making gRPC request'), {
    cause: Object.assign(new Error(message), { code }),
  });

/** A clock that moves only when the code under test sleeps. */
function fakeTime() {
  const t = { clock: 0, slept: [] as number[] };
  return {
    t,
    now: () => t.clock,
    sleep: (ms: number) => {
      t.slept.push(ms);
      t.clock += ms;
      return Promise.resolve();
    },
  };
}

test('throughOutages says once that Temporal is unreachable, backs off 1 s doubling to 10 s, and returns the answer once the server is back', async () => {
  const { t, now, sleep } = fakeTime();
  const lines: string[] = [];
  let calls = 0;
  const out = await throughOutages(
    () =>
      ++calls <= 6
        ? Promise.reject(grpcError(14, '14 UNAVAILABLE: No connection established'))
        : Promise.resolve('answer'),
    {
      say: (l) => lines.push(l),
      what: 'mosaic/alps-1',
      now,
      sleep,
    },
  );
  assert.equal(out, 'answer');
  assert.deepEqual(t.slept, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
  assert.equal(lines.length, 2, lines.join('\n'));
  assert.match(
    lines[0]!,
    /^Temporal unreachable \(14 UNAVAILABLE: No connection established\); still waiting for mosaic\/alps-1, retrying/,
  );
  assert.match(lines[1]!, /^Temporal answered again after 35 s; carrying on with mosaic\/alps-1$/);
});

test('throughOutages gives up after the bound unreachable, with an error that says so and names what it waited for', async () => {
  const { t, now, sleep } = fakeTime();
  const lines: string[] = [];
  await assert.rejects(
    throughOutages(() => Promise.reject(grpcError(4, '4 DEADLINE_EXCEEDED: Deadline exceeded')), {
      say: (l) => lines.push(l),
      what: 'seed/world-1',
      giveUpAfterMs: 60_000,
      now,
      sleep,
    }),
    (err: unknown) =>
      err instanceof TemporalUnreachableError &&
      /unreachable for 60 s .*gave up waiting for seed\/world-1/.test(err.message),
  );
  assert.equal(t.clock, 60_000, 'it waited the whole bound, and no longer');
  assert.equal(lines.length, 1);
});

test('throughOutages throws an answer at once: a workflow not found or a failed run is not an outage', async () => {
  const { t, now, sleep } = fakeTime();
  const lines: string[] = [];
  let calls = 0;
  await assert.rejects(
    throughOutages(
      () => {
        calls++;
        return Promise.reject(grpcError(5, '5 NOT_FOUND: workflow not found'));
      },
      { say: (l) => lines.push(l), what: 'x', now, sleep },
    ),
    /Unexpected error/,
  );
  assert.deepEqual([calls, t.slept.length, lines.length], [1, 0, 0]);
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

async function startWorker(env: TestWorkflowEnvironment, taskQueue: string): Promise<{ stop: () => Promise<void> }> {
  const connection = await NativeConnection.connect({ address: env.address });
  const worker: Worker = await createWorker({
    connection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: TEST_ROOTS,
  });
  const running = worker.run();
  return {
    stop: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

test(
  'mosaic watch rides out a server restart: it says it waits, then exits 0 with the mosaic result once the server is back',
  { timeout: 360_000 },
  async () => {
    const db = path.join(dir, 'temporal.sqlite');
    let env = await devServer(undefined, db);
    cleanups.push(() => env.teardown());
    const address = env.address;
    const port = Number(address.split(':').pop());
    // Slow tiles, one per batch, one batch at a time: the mosaic is still running when the server goes down.
    const tiles = await startDemoTileServer({ latencyMs: 300 });
    cleanups.push(() => tiles.close());
    const taskQueue = uniqueTaskQueue('watch-restart');
    let worker = await startWorker(env, taskQueue);
    cleanups.push(() => worker.stop());
    const workflowId = `watch-restart-${process.pid}`;
    await startMosaic(
      env.client,
      taskQueue,
      {
        source: { type: 'xyz', url: tiles.template, concurrency: 1 },
        sourceName: 'demo',
        bbox: [5.7, 44, 19.5, 49.9],
        zoom: 7,
        output: path.join(dir, 'watched.tif'),
        batchSize: 1,
        blockTiles: 64,
        parallelBatches: 1,
      },
      workflowId,
    );

    const watch = spawn(process.execPath, [main, 'mosaic', 'watch', workflowId], {
      env: { ...process.env, TEMPORAL_ADDRESS: address, TILEBREAKER_TASK_QUEUE: taskQueue },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => watch.exitCode === null && watch.kill('SIGKILL'));
    let out = '';
    let err = '';
    watch.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = once(watch, 'exit').then(([code]) => code as number | null);
    let exitedYet = false;
    void exited.then(() => (exitedYet = true));
    const news: (() => void)[] = [];
    watch.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      for (const n of news.splice(0)) n();
    });
    /** Until the watch's stderr matches `re`, or it exits (then the assertion says what it printed). */
    const saw = async (re: RegExp) => {
      while (!re.test(err) && !exitedYet) await Promise.race([new Promise<void>((r) => news.push(r)), exited]);
      assert.match(err, re, `the watch exited ${watch.exitCode} first; stdout: ${out}`);
    };

    // The watch follows the run (its progress bar is on stderr); then the worker stops and the server goes down.
    await saw(/\d+\/20 \| ok \d+/);
    await worker.stop();
    await env.teardown();
    await saw(/Temporal unreachable \(.*\); still waiting for watch-restart-\d+, retrying/);

    // Back on the same port and state file, with a worker: the run finishes and the watch with it.
    env = await devServer(port, db);
    worker = await startWorker(env, taskQueue);
    const code = await exited;
    assert.equal(code, 0, `stdout: ${out}\nstderr: ${err.slice(-2_000)}`);
    assert.match(out, /^20 tiles: ok 20, stale 0, hole 0, dead-lettered 0, failed 0/m);
    assert.match(err, /Temporal answered again after \d+ s; carrying on with watch-restart-\d+/);
  },
);
