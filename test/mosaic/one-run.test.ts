import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { listMosaics, mosaicWorkflowId, resolveMosaicId } from '../../src/client/mosaic-names';
import { cancelMosaic, MosaicAlreadyRunningError, startMosaic, startRedrive } from '../../src/client/mosaics';
import { createMosaicSchedule, deleteSchedule } from '../../src/client/schedules';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import type { ScheduledMosaicMemo, ScheduledMosaicResult } from '../../src/messages/scheduled-mosaic';
import { ALL_SEARCH_ATTRIBUTES, MOSAIC_NAME, type MosaicMemo } from '../../src/messages/search-attributes';
import { readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

// One output, one run: a schedule's run, a start by hand and a re-drive of an output never run at once.

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-one-run-'));
const taskQueue = uniqueTaskQueue('one-run');
// The breaker stays open once tripped: a mosaic of the down renderer dead-letters at once.
const BREAKER = { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 60_000 } };
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
/** Answers at once. */
let fast: DemoTileServer;
/** One tile every 2 s on one connection: a mosaic of it at zoom 9 (LONG: hundreds of tiles, minutes) outlasts any test. */
let slow: DemoTileServer;
let fastSources: string;
let slowSources: string;
const schedules: string[] = [];

function sourcesFile(name: string, s: DemoTileServer, concurrency: number): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, `sources:\n  demo:\n    type: xyz\n    url: ${s.template}\n    concurrency: ${concurrency}\n`);
  return file;
}

before(async () => {
  env = await devServerEnv(ALL_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: TEST_ROOTS,
    breaker: BREAKER,
  });
  running = worker.run();
  fast = await startDemoTileServer({ latencyMs: 2 });
  slow = await startDemoTileServer({ latencyMs: 2_000 });
  fastSources = sourcesFile('fast', fast, 4);
  slowSources = sourcesFile('slow', slow, 1);
});
after(async () => {
  for (const id of schedules) await deleteSchedule(env.client, id).catch(() => undefined);
  worker?.shutdown();
  await running;
  await env?.teardown();
  await fast?.close();
  await slow?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Slow mosaics are cancelled by the tests: one of 20 tiles (40 s) ended by itself once on a loaded machine. */
const LONG = { zoom: 9 };

/** 20 tiles at zoom 7 from a sources file, without the breaker unless asked. */
const request = (sourcesFile: string, output: string, extra: Partial<MosaicRequest> = {}): MosaicRequest => ({
  sourcesFile,
  sourceName: 'demo',
  bbox: [5.7, 44, 19.5, 49.9],
  zoom: 7,
  output,
  breaker: false,
  ...extra,
});

function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue }, timeout: 120_000 },
      (err, out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

/**
 * Retries `fn` until it returns without throwing: 600 tries, 200 ms apart (2 min at most). A schedule's
 * trigger is handled by the server's own scheduler workflow, which took over 30 s on a loaded machine.
 */
async function eventually<T>(what: string, fn: () => Promise<T>): Promise<T> {
  for (let k = 0; ; k++) {
    try {
      return await fn();
    } catch (err) {
      if (k >= 600) throw new Error(`${what}: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function schedule(
  id: string,
  req: MosaicRequest,
  opts: { name?: string; overlap?: string } = {},
): Promise<string> {
  await createMosaicSchedule(env.client, taskQueue, id, '0 2 * * *', req, undefined, opts);
  schedules.push(id);
  return id;
}

/** Triggers a schedule once and returns the id of the run it started (the schedule's launcher). */
async function trigger(scheduleId: string): Promise<string> {
  const handle = env.client.schedule.getHandle(scheduleId);
  const before = (await handle.describe()).info.recentActions.length;
  await handle.trigger();
  return eventually(`a run of ${scheduleId}`, async () => {
    const actions = (await handle.describe()).info.recentActions;
    if (actions.length <= before) throw new Error('not started yet');
    return actions[actions.length - 1]!.action.workflow.workflowId;
  });
}

const untilRunning = (workflowId: string) =>
  eventually(`${workflowId} running`, async () => {
    const d = await env.client.workflow.getHandle(workflowId).describe();
    if (d.status.name !== 'RUNNING') throw new Error(d.status.name);
    return d;
  });

const launcherMemo = async (id: string) =>
  (await env.client.workflow.getHandle(id).describe()).memo as ScheduledMosaicMemo;

test(
  "two schedules on one output: one runs the mosaic under the output's id, the other is skipped naming it; status, list and cancel by name reach the scheduled run",
  { timeout: 420_000 },
  async () => {
    const output = path.join(dir, 'twice.tif');
    const id = mosaicWorkflowId(output);
    await schedule('one-run-a', request(slowSources, output, LONG), { name: 'twice' });
    await schedule('one-run-b', request(slowSources, output, LONG), { name: 'twice' });
    const a = await trigger('one-run-a');
    const child = await untilRunning(id);
    assert.equal(child.type, 'mosaicWorkflow');
    assert.equal(child.parentExecution?.workflowId, a);
    // Labelled as a start by hand is, plus the schedule that started it.
    assert.equal((child.memo as MosaicMemo).name, 'twice');
    assert.equal((child.memo as MosaicMemo).schedule, 'one-run-a');
    assert.equal(child.typedSearchAttributes.get(MOSAIC_NAME), 'twice');

    const b = await trigger('one-run-b');
    const skipped = (await env.client.workflow.getHandle(b).result()) as ScheduledMosaicResult;
    assert.equal(skipped.outcome, 'skipped');
    assert.equal(skipped.workflowId, id);
    assert.match(
      skipped.message,
      new RegExp(
        `^skipped \\(overlap skip\\): ${id} is already running \\(a mosaic or re-drive of ${output.replace(/[.\\/]/g, '\\$&')}`,
      ),
    );
    assert.equal((await launcherMemo(b)).state, 'skipped');
    // The same schedule triggered again (trigger's own overlap is allow-all): the output is still taken. The
    // server names a schedule's run by the second it was taken in: a trigger within the second of a's (a quiet
    // machine gets here that fast) would collide with a's id and take no action.
    await new Promise((r) => setTimeout(r, 1_100));
    const again = await trigger('one-run-a');
    assert.equal(((await env.client.workflow.getHandle(again).result()) as ScheduledMosaicResult).outcome, 'skipped');
    // The one mosaic of the output is still a's.
    assert.equal((await untilRunning(id)).parentExecution?.workflowId, a);

    const byName = await eventually('status by name', async () => {
      const r = await cli(['mosaic', 'status', 'twice', '--json']);
      if (r.code !== 0) throw new Error(r.err);
      return JSON.parse(r.out) as { workflowId: string; status: string };
    });
    assert.deepEqual([byName.workflowId, byName.status], [id, 'RUNNING']);
    const listed = await listMosaics(env.client, { name: 'twice', status: 'running' });
    assert.deepEqual(
      listed.mosaics.map((m) => [m.type, m.workflowId]),
      [['mosaicWorkflow', id]],
    );
    const cancelled = await cli(['mosaic', 'cancel', 'twice', '--json']);
    assert.equal(cancelled.code, 0, cancelled.err);
    assert.deepEqual(
      [
        (JSON.parse(cancelled.out) as { workflowId: string; status: string }).workflowId,
        (JSON.parse(cancelled.out) as { status: string }).status,
      ],
      [id, 'CANCELLED'],
    );
    // The launcher ends with its mosaic.
    await assert.rejects(env.client.workflow.getHandle(a).result(), WorkflowFailedError);
  },
);

test(
  "a start by hand and a re-drive during a schedule's run are refused, naming the running id and its schedule",
  { timeout: 420_000 },
  async () => {
    const output = path.join(dir, 'nightly.tif');
    const id = mosaicWorkflowId(output);
    await schedule('one-run-nightly', request(slowSources, output, LONG));
    await trigger('one-run-nightly');
    await untilRunning(id);
    try {
      await assert.rejects(
        startMosaic(env.client, taskQueue, request(fastSources, output)),
        (err: unknown) =>
          err instanceof MosaicAlreadyRunningError &&
          err.workflowId === id &&
          err.message.includes(`is already running as ${id} (started by schedule one-run-nightly); follow it with`),
      );
      const byCli = await cli([
        'mosaic',
        'start',
        '--sources',
        fastSources,
        '--source',
        'demo',
        '--bbox',
        '5.7,44,19.5,49.9',
        '--zoom',
        '7',
        '--no-breaker',
        '--out',
        output,
      ]);
      assert.equal(byCli.code, 2, byCli.out);
      assert.ok(
        byCli.err.includes(
          `a mosaic of ${output} is already running as ${id} (started by schedule one-run-nightly); follow it with: tilebreaker mosaic watch ${id}`,
        ),
        byCli.err,
      );
      await assert.rejects(startRedrive(env.client, taskQueue, output), {
        message: `mosaic ${id} (started by schedule one-run-nightly) is still running; re-drive it once it has finished, or cancel it first (tilebreaker mosaic cancel ${id})`,
      });
    } finally {
      await cancelMosaic(env.client, id);
    }
  },
);

test(
  "a schedule's run while a run by hand holds the output: skip ends it, buffer-one waits and then runs, allow-all fails; each names the running id",
  { timeout: 420_000 },
  async () => {
    const output = path.join(dir, 'held.tif');
    const id = mosaicWorkflowId(output);
    const manual = await startMosaic(env.client, taskQueue, request(slowSources, output, LONG), { name: 'held' });
    assert.equal(manual.workflowId, id);
    await schedule('one-run-skip', request(fastSources, output), { overlap: 'skip' });
    await schedule('one-run-buffer', request(fastSources, output), { overlap: 'buffer-one' });
    await schedule('one-run-fail', request(fastSources, output), { overlap: 'allow-all' });

    const skipped = (await env.client.workflow
      .getHandle(await trigger('one-run-skip'))
      .result()) as ScheduledMosaicResult;
    assert.deepEqual([skipped.outcome, skipped.workflowId], ['skipped', id]);

    const failing = await trigger('one-run-fail');
    await assert.rejects(env.client.workflow.getHandle(failing).result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      assert.match(
        String(err.cause?.message),
        new RegExp(
          `^not started \\(overlap allow-all, but one output runs once at a time\\): ${id} is already running`,
        ),
      );
      return true;
    });

    const buffered = await trigger('one-run-buffer');
    const waiting = await eventually('the buffered run waits', async () => {
      const m = await launcherMemo(buffered);
      if (m.state !== 'waiting') throw new Error(String(m.state));
      return m;
    });
    assert.match(String(waiting.message), new RegExp(`^waiting \\(overlap buffer-one\\) until ${id} ends`));
    // The run by hand is untouched while the scheduled one waits; once it ends, the scheduled one runs.
    assert.equal((await manual.describe()).status.name, 'RUNNING');
    await cancelMosaic(env.client, id);
    const ran = (await env.client.workflow.getHandle(buffered).result()) as ScheduledMosaicResult;
    assert.deepEqual([ran.outcome, ran.workflowId, ran.result?.counts.ok], ['completed', id, 20]);
    assert.equal((await env.client.workflow.getHandle(id).describe()).parentExecution?.workflowId, buffered);
  },
);

test(
  'a re-drive runs under the output id: a start by hand, a second re-drive and a schedule during it are refused or skipped, naming it',
  { timeout: 420_000 },
  async () => {
    // Dead letters first: the renderer is down, the breaker trips and refuses the rest (fail-fast).
    const down = await startDemoTileServer({ latencyMs: 2 });
    const output = path.join(dir, 'redriven.tif');
    const id = mosaicWorkflowId(output);
    try {
      down.setDown(true);
      const first = await startMosaic(
        env.client,
        taskQueue,
        request(sourcesFile('down', down, 4), output, { ...LONG, breaker: true, fallback: 'fail-fast' }),
      );
      const result = await first.result();
      assert.ok(readManifest(result).counts['dead-lettered'] > 0, JSON.stringify(result.counts));
    } finally {
      await down.close();
    }
    // Re-driven from the slow renderer (the same tiles), so it runs while the test tries the others.
    const redrive = await startRedrive(env.client, taskQueue, output, undefined, {
      sourcesFile: slowSources,
      sourceName: 'demo',
    });
    assert.equal(redrive, id);
    assert.equal((await untilRunning(id)).type, 'redriveMosaicWorkflow');
    try {
      await assert.rejects(
        startMosaic(env.client, taskQueue, request(fastSources, output)),
        (err: unknown) =>
          err instanceof MosaicAlreadyRunningError &&
          err.message.includes(`is already running as ${id} (a re-drive); follow it with`),
      );
      await assert.rejects(startRedrive(env.client, taskQueue, output), {
        message: `a re-drive of this mosaic is already running as ${id}; follow it with: tilebreaker mosaic watch ${id}`,
      });
      await schedule('one-run-during-redrive', request(fastSources, output));
      const skipped = (await env.client.workflow
        .getHandle(await trigger('one-run-during-redrive'))
        .result()) as ScheduledMosaicResult;
      assert.deepEqual([skipped.outcome, skipped.workflowId], ['skipped', id]);
      assert.equal(await eventually('the re-drive by name', () => resolveMosaicId(env.client, 'redriven')), id);
    } finally {
      await cancelMosaic(env.client, id);
    }
  },
);

test('bad schedule input names the field and the value', async () => {
  await assert.rejects(
    createMosaicSchedule(
      env.client,
      taskQueue,
      'one-run-bad',
      '0 2 * * *',
      request(fastSources, path.join(dir, 'bad.tif')),
      undefined,
      { overlap: 'cancel-other' },
    ),
    {
      message: '--overlap: must be one of skip, buffer-one, buffer-all, allow-all (got "cancel-other")',
    },
  );
  const r = await cli([
    'schedule',
    'create',
    'one-run-bad',
    '--cron',
    '0 2 * * *',
    '--request',
    path.join(dir, 'nope.yaml'),
    '--overlap',
    'terminate-other',
  ]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--overlap: must be one of skip, buffer-one, buffer-all, allow-all \(got "terminate-other"\)/);
  // Started by anyone with a made-up id: refused before it starts anything.
  const launcher = await env.client.workflow.start('scheduledMosaicWorkflow', {
    taskQueue,
    workflowId: `one-run-bad-${process.pid}`,
    args: [
      {
        request: request(fastSources, path.join(dir, 'bad.tif')),
        workflowId: 'breaker/https://x',
        overlap: 'skip',
        scheduleId: 's',
        label: { name: 'bad', source: 'demo', zoom: 7, output: 'x' },
        attributes: false,
      },
    ],
  });
  await assert.rejects(launcher.result(), (err: unknown) => {
    assert.ok(err instanceof WorkflowFailedError);
    assert.equal(
      err.cause?.message,
      'scheduled mosaic: workflowId: must be an output mosaic id, mosaic/<name>-<8 hex digits> (got "breaker/https://x")',
    );
    return true;
  });
});
