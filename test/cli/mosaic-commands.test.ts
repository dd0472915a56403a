import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { cancelReport } from '../../src/cli/mosaic/cancel';
import { barPhase, waitingLine, waitingLines } from '../../src/cli/mosaic/progress';
import { requestFromOptions } from '../../src/cli/mosaic/request';
import { startMosaic, type MosaicStatus } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-cli-mosaic-'));
const taskQueue = uniqueTaskQueue('cli-mosaic');
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let server: DemoTileServer;
let sources: string;

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: TEST_ROOTS,
    breaker: { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 60_000 } },
  });
  running = worker.run();
  server = await startDemoTileServer({ latencyMs: 2 });
  sources = path.join(dir, 'sources.yaml');
  writeFileSync(sources, `sources:\n  demo:\n    type: xyz\n    url: ${server.template}\n    concurrency: 4\n`);
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
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

const area = ['--sources', '', '--source', 'demo', '--bbox', '5.7,44,19.5,49.9', '--zoom', '7'];
const withSources = () => area.map((a) => (a === '' ? sources : a));

test('mosaic start --wait --json: a whole mosaic exits 0 and prints its result', async () => {
  const r = await cli([
    'mosaic',
    'start',
    ...withSources(),
    '--out',
    path.join(dir, 'ok.tif'),
    '--id',
    'cli-ok',
    '--wait',
    '--json',
  ]);
  assert.equal(r.code, 0, r.err);
  const result = JSON.parse(r.out) as { total: number; counts: { ok: number }; manifest: string };
  assert.equal(result.total, 20);
  assert.equal(result.counts.ok, 20);
  assert.equal(assertAccounted(readManifest(result)), null);
  const status = await cli(['mosaic', 'status', 'cli-ok', '--json']);
  assert.equal(status.code, 0, status.err);
  const s = JSON.parse(status.out) as { status: string; progress: { done: number; total: number; phase: string } };
  assert.equal(s.status, 'COMPLETED');
  assert.deepEqual([s.progress.done, s.progress.total, s.progress.phase], [20, 20, 'done']);
});

test('mosaic start with the renderer down and fallback hole: done with gaps, exit 3', async () => {
  server.setDown(true);
  try {
    const r = await cli([
      'mosaic',
      'start',
      ...withSources(),
      '--out',
      path.join(dir, 'holes.tif'),
      '--fallback',
      'hole',
      '--id',
      'cli-holes',
      '--wait',
    ]);
    assert.equal(r.code, 3, `${r.out}\n${r.err}`);
    assert.match(r.out, /20 tiles: ok 0, .*hole \d+, dead-lettered \d+/);
    // status says what watch says: done with gaps is exit 3, not 0.
    const status = await cli(['mosaic', 'status', 'cli-holes']);
    assert.equal(status.code, 3, `${status.out}\n${status.err}`);
  } finally {
    server.setDown(false);
  }
});

test('bad input exits 2 before anything starts, naming the field and the value', async () => {
  const r = await cli([
    'mosaic',
    'start',
    ...withSources().map((a) => (a === '5.7,44,19.5,49.9' ? '19.5,44,5.7,49.9' : a)),
    '--out',
    path.join(dir, 'bad.tif'),
  ]);
  assert.equal(r.code, 2);
  assert.match(r.err, /bbox: west must be less than east .*got \[19\.5,44,5\.7,49\.9\]/);
  const z = await cli(['mosaic', 'start', ...withSources(), '--zoom', 'seven', '--out', path.join(dir, 'bad.tif')]);
  assert.equal(z.code, 2);
  assert.match(z.err, /--zoom: must be a number \(got "seven"\)/);
  const holes = await cli([
    'mosaic',
    'start',
    ...withSources().map((a) => (a === '5.7,44,19.5,49.9' ? '5.7,,19.5,49.9' : a)),
    '--out',
    path.join(dir, 'bad.tif'),
  ]);
  assert.equal(holes.code, 2);
  assert.match(holes.err, /--bbox: must be four numbers west,south,east,north \(got "5\.7,,19\.5,49\.9"\)/);
  // Checked against the sources file on the client, with the worker's planner: nothing is started.
  const zoom = await cli([
    'mosaic',
    'start',
    ...withSources().map((a) => (a === '7' ? '23' : a)),
    '--out',
    path.join(dir, 'zoom.tif'),
    '--id',
    'cli-zoom',
  ]);
  assert.equal(zoom.code, 2, zoom.out);
  assert.match(zoom.err, /zoom: must be within the source's range 0\.\.\d+ \(got 23\)/);
  await assert.rejects(env.client.workflow.getHandle('cli-zoom').describe(), /not found/);
  const nightly = path.join(dir, 'nightly-bad.json');
  writeFileSync(
    nightly,
    JSON.stringify({
      sourcesFile: sources,
      sourceName: 'demo',
      bbox: [5.7, 44, 19.5, 49.9],
      zoom: 7,
      output: path.join(dir, 'n.tif'),
      maxTiles: 3,
    }),
  );
  const sched = await cli(['schedule', 'create', 'cli-bad-nightly', '--cron', '30 1 * * *', '--request', nightly]);
  assert.equal(sched.code, 2, sched.out);
  assert.match(sched.err, /maxTiles: the plan has 20 tiles .* more than maxTiles 3/);
  const unknown = await cli(['mosaic', 'status', 'no-such-mosaic']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.err, /no mosaic with id or name "no-such-mosaic"/);
  const usage = await cli(['mosaic', 'frobnicate']);
  assert.equal(usage.code, 2);
});

test('schedule create, list --json and delete through the CLI', async () => {
  const request = path.join(dir, 'nightly.json');
  writeFileSync(
    request,
    JSON.stringify({
      sourcesFile: sources,
      sourceName: 'demo',
      bbox: [5.7, 44, 19.5, 49.9],
      zoom: 7,
      output: path.join(dir, 'nightly.tif'),
    }),
  );
  const c = await cli(['schedule', 'create', 'cli-nightly', '--cron', '30 1 * * *', '--request', request, '--json']);
  assert.equal(c.code, 0, c.err);
  assert.deepEqual(JSON.parse(c.out), {
    scheduleId: 'cli-nightly',
    name: 'nightly',
    cron: '30 1 * * *',
    timezone: 'UTC',
    overlap: 'skip',
  });
  const l = await cli(['schedule', 'list', '--json']);
  // One object, its rows under items, as every list command gives them.
  const listed = JSON.parse(l.out) as {
    items: { scheduleId: string; cron: string[]; nextRuns: string[] }[];
    count: number;
  };
  assert.equal(listed.count, listed.items.length);
  const mine = listed.items.find((s) => s.scheduleId === 'cli-nightly');
  assert.deepEqual(mine?.cron, ['30 1 * * *']);
  assert.match(mine.nextRuns[0]!, /T01:30:00\.000Z$/);
  const d = await cli(['schedule', 'delete', 'cli-nightly', '--json']);
  assert.equal(d.code, 0, d.err);
  assert.deepEqual(JSON.parse(d.out), { scheduleId: 'cli-nightly', deleted: true });
  const again = await cli(['schedule', 'delete', 'cli-nightly']);
  assert.equal(again.code, 2);
  assert.match(again.err, /no schedule with id "cli-nightly"/);
});

test('schedule list names the time zone of each cron spec, in text and --json, for schedules made before it was kept too', async () => {
  const request = path.join(dir, 'zurich.json');
  writeFileSync(
    request,
    JSON.stringify({
      sourcesFile: sources,
      sourceName: 'demo',
      bbox: [5.7, 44, 19.5, 49.9],
      zoom: 7,
      output: path.join(dir, 'zurich.tif'),
    }),
  );
  const c = await cli([
    'schedule',
    'create',
    'cli-zurich',
    '--cron',
    '30 1 * * *',
    '--timezone',
    'Europe/Zurich',
    '--request',
    request,
  ]);
  assert.equal(c.code, 0, c.err);
  // As an earlier release made it: the zone in the spec only, not in the memo.
  await env.client.schedule.create({
    scheduleId: 'cli-old-tokyo',
    spec: { cronExpressions: ['0 3 * * *'], timezone: 'Asia/Tokyo' },
    action: { type: 'startWorkflow', workflowType: 'scheduledMosaicWorkflow', taskQueue, args: [] },
    memo: { cron: '0 3 * * *' },
    state: { paused: true },
  });
  try {
    const text = await cli(['schedule', 'list']);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /^cli-zurich {2}30 1 \* \* \* \(Europe\/Zurich\) {2}active/m);
    assert.match(text.out, /^cli-old-tokyo {2}0 3 \* \* \* \(Asia\/Tokyo\) {2}paused/m);
    const json = JSON.parse((await cli(['schedule', 'list', '--json'])).out) as {
      items: { scheduleId: string; timezone: string }[];
    };
    assert.deepEqual(
      json.items
        .filter((s) => s.scheduleId.startsWith('cli-zurich') || s.scheduleId.startsWith('cli-old-tokyo'))
        .map((s) => [s.scheduleId, s.timezone])
        .sort(),
      [
        ['cli-old-tokyo', 'Asia/Tokyo'],
        ['cli-zurich', 'Europe/Zurich'],
      ],
    );
  } finally {
    await cli(['schedule', 'delete', 'cli-zurich']);
    await env.client.schedule.getHandle('cli-old-tokyo').delete();
  }
});

test('mosaic redrive refuses while the mosaic itself is still running', async () => {
  const slow = await startDemoTileServer({ latencyMs: 300 });
  try {
    const output = path.join(dir, 'running.tif');
    const handle = await startMosaic(env.client, taskQueue, {
      source: { type: 'xyz', url: slow.template, concurrency: 1 },
      bbox: [5.7, 44, 19.5, 49.9],
      zoom: 7,
      output,
      breaker: false,
    });
    const r = await cli(['mosaic', 'redrive', output]);
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      /mosaic mosaic\/running-[0-9a-f]{8} is still running; re-drive it once it has finished, or cancel it first/,
    );
    const named = await cli(['mosaic', 'redrive', output, '--name', 'demo']);
    assert.equal(named.code, 2, named.err);
    assert.match(named.err, /--name "demo": give --sources FILE as well/);
    await handle.cancel();
    await handle.result().catch(() => undefined);
  } finally {
    await slow.close();
  }
});

test('mosaic redrive --wait-for: a bad duration exits 2 naming the flag and the value; a good one reaches the workflow as waitForMs', async () => {
  const output = path.join(dir, 'ok.tif');
  for (const bad of ['soon', '10', '0s']) {
    const r = await cli(['mosaic', 'redrive', output, '--wait-for', bad]);
    assert.equal(r.code, 2, r.err);
    assert.ok(r.err.includes('--wait-for') && r.err.includes(`"${bad}"`), r.err);
  }
  const id = `cli-redrive-wait-for-${process.pid}`;
  const r = await cli(['mosaic', 'redrive', output, '--wait-for', '90s', '--id', id, '--no-wait']);
  assert.equal(r.code, 0, r.err);
  const history = await env.client.workflow.getHandle(id).fetchHistory();
  const input = defaultPayloadConverter.fromPayload<{ manifest: string; waitForMs?: number }>(
    history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!,
  );
  assert.equal(input.waitForMs, 90_000);
  await env.client.workflow.getHandle(id).result();
});

test('the watch line says which breaker a wait is on, in which state, when the next try is and when it gives up, each time named', () => {
  const now = Date.parse('2001-02-03T12:00:00Z');
  const waitingFor = {
    key: 'http://127.0.0.1:8080',
    state: 'half-open' as const,
    deadlineAt: Date.parse('2001-02-03T12:30:00Z'),
  };
  assert.equal(
    waitingLine({ waitingFor, waitingUntil: now + 4_400 }, now),
    'waiting for breaker http://127.0.0.1:8080 (half-open): next try in 4 s; gives up at 2001-02-03T12:30:00.000Z',
  );
  assert.equal(
    waitingLine({ waitingFor: { ...waitingFor, deadlineAt: null }, waitingUntil: now + 4_400 }, now),
    'waiting for breaker http://127.0.0.1:8080 (half-open): next try in 4 s',
  );
  assert.equal(
    waitingLine({ waitingFor, waitingUntil: null }, now),
    'waiting for breaker http://127.0.0.1:8080 (half-open): gives up at 2001-02-03T12:30:00.000Z',
  );
  assert.equal(waitingLine({ waitingFor: null, waitingUntil: now + 4_400 }, now), null);
  // A workflow from before waitingFor existed.
  assert.equal(waitingLine({ waitingUntil: now + 4_400 }, now), null);
  // The bar's phase gives the next try, named as such (the deadline is the line's), never a bare "until".
  assert.equal(
    barPhase({ phase: 'waiting', waitingUntil: now + 4_400 }),
    'waiting for the breaker, next try at 12:00:04Z',
  );
  assert.equal(barPhase({ phase: 'fetching', waitingUntil: null }), 'fetching');
});

test('the watch prints the waiting line when what is waited for changes, not on every read or retry', () => {
  const now = Date.parse('2001-02-03T12:00:00Z');
  const on = (state: 'open' | 'half-open') => ({ key: 'http://127.0.0.1:8080', state, deadlineAt: now + 60_000 });
  const news = waitingLines();
  const seen = [
    news({ done: 0, waitingFor: on('open'), waitingUntil: now + 2_000 }, now),
    news({ done: 0, waitingFor: on('open'), waitingUntil: now + 3_000 }, now + 1_000),
    news({ done: 0, waitingFor: null, waitingUntil: null }, now + 1_500),
    news({ done: 0, waitingFor: on('open'), waitingUntil: now + 4_000 }, now + 2_000),
    news({ done: 0, waitingFor: on('half-open'), waitingUntil: now + 5_000 }, now + 3_000),
    news({ done: 10, waitingFor: null, waitingUntil: null }, now + 4_000),
    news({ done: 10, waitingFor: on('half-open'), waitingUntil: now + 6_000 }, now + 5_000),
  ];
  assert.deepEqual(
    seen.map((l) => l?.replace(/; gives up at .*$/, '') ?? null),
    [
      'waiting for breaker http://127.0.0.1:8080 (open): next try in 2 s',
      null,
      null,
      null,
      'waiting for breaker http://127.0.0.1:8080 (half-open): next try in 2 s',
      null,
      'waiting for breaker http://127.0.0.1:8080 (half-open): next try in 1 s',
    ],
  );
});

test('mosaic start flags: --block-tiles and --parallel-batches reach the request; a bad request file is named in the error', () => {
  const r = requestFromOptions({
    sources: 's.yaml',
    bbox: '1,2,3,4',
    zoom: '5',
    out: 'x.tif',
    blockTiles: '64',
    parallelBatches: '2',
    deadline: '1h30m',
  });
  assert.equal(r.blockTiles, 64);
  assert.equal(r.parallelBatches, 2);
  assert.equal(r.deadline, '1h30m');
  // --no-sidecars (commander: sidecars false; true when absent) asks for the TIFF alone; absent, the request says nothing.
  assert.equal('sidecars' in r, false);
  assert.equal(requestFromOptions({ out: 'x.tif', sidecars: true }).sidecars, undefined);
  assert.equal(requestFromOptions({ out: 'x.tif', sidecars: false }).sidecars, false);
  assert.throws(
    () => requestFromOptions({ parallelBatches: 'many' }),
    /--parallel-batches: must be a number \(got "many"\)/,
  );
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-req-'));
  try {
    const bad = path.join(dir, 'alps.yaml');
    writeFileSync(bad, 'bbox: [1, 2\nzoom: : 3\n');
    assert.throws(
      () => requestFromOptions({ request: bad }),
      (e: unknown) => (e as Error).message.startsWith(`request file ${bad}: not valid YAML: `),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('one spelling everywhere: redrive takes --source NAME as mosaic start does, start takes --no-wait as redrive does', async () => {
  const r = await cli(['mosaic', 'redrive', path.join(dir, 'any.manifest.json'), '--source', 'demo']);
  assert.equal(r.code, 2);
  assert.match(r.err, /--name "demo": give --sources FILE as well/);
  const s = await cli([
    'mosaic',
    'start',
    ...withSources(),
    '--out',
    path.join(dir, 'nowait.tif'),
    '--id',
    'cli-nowait',
    '--no-wait',
  ]);
  assert.equal(s.code, 0, s.err);
  assert.match(s.out, /^started mosaic cli-nowait /);
  await env.client.workflow.getHandle('cli-nowait').result();
});

test('mosaic cancel of a mosaic whose plan was refused says it had ended and wrote no manifest, not that a partial one is beside the output', async () => {
  // The worker's roots leave this output out: the plan is refused and the run fails before any tile.
  const handle = await startMosaic(env.client, taskQueue, {
    source: { type: 'xyz', url: server.template },
    bbox: [5.7, 44, 19.5, 49.9],
    zoom: 7,
    output: '/tilebreaker-nowhere/refused.tif',
    breaker: false,
  });
  await assert.rejects(handle.result());
  const r = await cli(['mosaic', 'cancel', handle.workflowId]);
  assert.equal(r.code, 0, r.err);
  assert.doesNotMatch(r.out, /partial manifest beside/);
  assert.match(
    r.out,
    new RegExp(
      `^mosaic ${handle.workflowId}: had already ended before this cancel \\(FAILED: .*outside this worker's roots.*\\); the cancel changed nothing\\. It ended while planning, before any tile was fetched: no manifest was written\\.$`,
      'm',
    ),
  );
  const j = JSON.parse((await cli(['mosaic', 'cancel', handle.workflowId, '--json'])).out) as {
    status: string;
    wasRunning: boolean;
    manifest: string;
    message: string;
  };
  assert.deepEqual([j.status, j.wasRunning, j.manifest], ['FAILED', false, 'none']);
});

test('cancelReport: what a cancel left, by where the run was (planning, fetching, done)', () => {
  const progress = (total: number, done: number, phase: 'planning' | 'cancelled' | 'assembling') => ({
    total,
    done,
    counts: { ok: done, stale: 0, hole: 0, 'dead-lettered': 0, failed: 0, outside: 0 },
    phase,
    etaSeconds: null,
    runningBlocks: [],
    breakerStates: [],
    breakerKeys: [],
    waitingUntil: null,
  });
  const base: MosaicStatus & { wasRunning: boolean } = {
    workflowId: 'mosaic/a',
    runId: 'r',
    status: 'CANCELLED',
    progress: null,
    blockProgress: null,
    result: null,
    failure: 'Workflow execution cancelled',
    failureType: null,
    wasRunning: true,
  };
  const planning = cancelReport('mosaic/a', { ...base, progress: progress(0, 0, 'planning') });
  assert.equal(planning.manifest, 'none');
  assert.match(planning.message, /It ended while planning, before any tile was fetched: no manifest was written\.$/);
  const fetching = cancelReport('mosaic/a', { ...base, progress: progress(130, 40, 'cancelled') });
  assert.deepEqual(fetching, {
    manifest: 'partial',
    message:
      'mosaic mosaic/a: CANCELLED: Workflow execution cancelled. It stopped after 40/130 tiles; its partial manifest beside the output accounts for every tile.',
  });
  assert.equal(
    cancelReport('mosaic/a', { ...base, progress: progress(130, 130, 'assembling'), status: 'FAILED' }).manifest,
    'none',
  );
  assert.equal(cancelReport('mosaic/a', base).manifest, 'unknown');
});
