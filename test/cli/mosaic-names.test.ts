import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import {
  legacyMosaicWorkflowId,
  listMosaics,
  mosaicWorkflowId,
  redriveWorkflowId,
  resolveMosaicId,
  type ListedMosaic,
} from '../../src/client/mosaic-names';
import { startMosaic } from '../../src/client/mosaics';
import { deleteSchedule } from '../../src/client/schedules';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { checkMosaicName, defaultMosaicName } from '../../src/messages/mosaic-names';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import {
  ALL_SEARCH_ATTRIBUTES,
  BREAKER_SEARCH_ATTRIBUTES,
  MOSAIC_NAME,
  MOSAIC_PROGRESS,
  MOSAIC_SOURCE,
  MOSAIC_STATUS,
  MOSAIC_ZOOM,
} from '../../src/messages/search-attributes';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-names-'));
const taskQueue = uniqueTaskQueue('names');
const BREAKER = { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 60_000 } };
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
/** Answers at once. */
let fast: DemoTileServer;
/** One tile every 2 s on one connection: a mosaic of it runs for as long as a test needs. */
let slow: DemoTileServer;
let fastSources: string;
let slowSources: string;

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
  worker?.shutdown();
  await running;
  await env?.teardown();
  await fast?.close();
  await slow?.close();
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

const area = (sources: string) => [
  '--sources',
  sources,
  '--source',
  'demo',
  '--bbox',
  '5.7,44,19.5,49.9',
  '--zoom',
  '7',
  '--no-breaker',
];

/** Visibility is eventually consistent: retry `fn` until it stops throwing (10 s at most). */
async function eventually<T>(fn: () => Promise<T>): Promise<T> {
  for (let k = 0; ; k++) {
    try {
      return await fn();
    } catch (err) {
      if (k >= 50) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

test('a mosaic is named by its output base name by default; a given name is checked, naming the field and value', () => {
  assert.equal(defaultMosaicName('/tmp/x/alps.tif'), 'alps');
  assert.equal(defaultMosaicName('/tmp/x/alps.manifest.json'), 'alps');
  assert.equal(defaultMosaicName('/tmp/x/my map (v2).tiff'), 'my-map-v2-');
  assert.equal(checkMosaicName('alps-2026_summer.v1'), 'alps-2026_summer.v1');
  assert.throws(
    () => checkMosaicName('../alps', '--name'),
    /^Error: --name: a mosaic name is 1-64 letters.* \(got "\.\.\/alps"\)$/,
  );
  assert.throws(() => checkMosaicName('', '--name'), /\(got ""\)/);
  // The id follows the output alone: one output, one id; two folders, two ids with the same readable start.
  assert.equal(mosaicWorkflowId('/a/alps.tif'), mosaicWorkflowId('/a/alps.manifest.json'));
  assert.match(mosaicWorkflowId('/a/alps.tif'), /^mosaic\/alps-[0-9a-f]{8}$/);
  assert.notEqual(mosaicWorkflowId('/a/alps.tif'), mosaicWorkflowId('/b/alps.tif'));
  assert.match(redriveWorkflowId('/a/alps.tif'), /^redrive\/alps-[0-9a-f]{8}$/);
  assert.equal(legacyMosaicWorkflowId('/a/alps.tif'), 'mosaic/a/alps');
});

test('a second start of one output is refused while it runs; another output with the same base name starts; the name then is ambiguous', async () => {
  mkdirSync(path.join(dir, 'one'));
  mkdirSync(path.join(dir, 'two'));
  const first = await cli([
    'mosaic',
    'start',
    ...area(slowSources),
    '--out',
    path.join(dir, 'one', 'alps.tif'),
    '--json',
  ]);
  assert.equal(first.code, 0, first.err);
  const a = JSON.parse(first.out) as { name: string; workflowId: string };
  assert.equal(a.name, 'alps');
  assert.match(a.workflowId, /^mosaic\/alps-[0-9a-f]{8}$/);

  const again = await cli(['mosaic', 'start', ...area(slowSources), '--out', path.join(dir, 'one', 'alps.tif')]);
  assert.equal(again.code, 2, again.out);
  assert.match(
    again.err,
    new RegExp(
      `a mosaic of .*/one/alps\\.tif is already running as ${a.workflowId}; follow it with: tilebreaker mosaic watch ${a.workflowId}`,
    ),
  );
  // Another name does not make it another mosaic: the output is what must not run twice.
  const renamed = await cli([
    'mosaic',
    'start',
    ...area(slowSources),
    '--out',
    path.join(dir, 'one', 'alps.tif'),
    '--name',
    'other',
  ]);
  assert.equal(renamed.code, 2, renamed.out);
  assert.match(renamed.err, /already running as/);

  const second = await cli([
    'mosaic',
    'start',
    ...area(slowSources),
    '--out',
    path.join(dir, 'two', 'alps.tif'),
    '--json',
  ]);
  assert.equal(second.code, 0, second.err);
  const b = JSON.parse(second.out) as { name: string; workflowId: string };
  assert.equal(b.name, 'alps');
  assert.notEqual(b.workflowId, a.workflowId);

  // Two running under one name: the name alone does not say which, and the error names both.
  const ambiguous = await eventually(async () => {
    const r = await cli(['mosaic', 'status', 'alps']);
    if (!/ambiguous/.test(r.err)) throw new Error(`not ambiguous yet: ${r.err}${r.out}`);
    return r;
  });
  assert.equal(ambiguous.code, 2);
  assert.ok(ambiguous.err.includes(a.workflowId) && ambiguous.err.includes(b.workflowId), ambiguous.err);

  // By id, either one; once the first is cancelled, the name means the one still running.
  const cancelled = await cli(['mosaic', 'cancel', a.workflowId, '--json']);
  assert.equal(cancelled.code, 0, cancelled.err);
  assert.equal((JSON.parse(cancelled.out) as { status: string }).status, 'CANCELLED');
  // The run said so itself before it ended, in its memo and its attribute.
  const gone = await env.client.workflow.getHandle(a.workflowId).describe();
  assert.equal((gone.memo as { status?: string }).status, 'cancelled');
  assert.equal(gone.typedSearchAttributes.get(MOSAIC_STATUS), 'cancelled');
  const byName = await eventually(async () => {
    const r = await cli(['mosaic', 'status', 'alps', '--json']);
    if (r.code !== 0) throw new Error(r.err);
    return JSON.parse(r.out) as { workflowId: string; status: string };
  });
  assert.deepEqual([byName.workflowId, byName.status], [b.workflowId, 'RUNNING']);
  const cancelByName = await cli(['mosaic', 'cancel', 'alps', '--json']);
  assert.equal(cancelByName.code, 0, cancelByName.err);
  assert.deepEqual(
    [
      (JSON.parse(cancelByName.out) as { workflowId: string }).workflowId,
      (JSON.parse(cancelByName.out) as { status: string }).status,
    ],
    [b.workflowId, 'CANCELLED'],
  );
  // Neither runs now: the same output starts again, under the same id.
  const restarted = await cli([
    'mosaic',
    'start',
    ...area(slowSources),
    '--out',
    path.join(dir, 'one', 'alps.tif'),
    '--json',
  ]);
  assert.equal(restarted.code, 0, restarted.err);
  assert.equal((JSON.parse(restarted.out) as { workflowId: string }).workflowId, a.workflowId);
  assert.equal((await cli(['mosaic', 'cancel', a.workflowId])).code, 0);
});

test('status, watch, cancel and redrive take a name (or mosaic/NAME); a run with an old path-style id stays reachable and is not doubled', async () => {
  const done = await cli([
    'mosaic',
    'start',
    ...area(fastSources),
    '--out',
    path.join(dir, 'summer-out.tif'),
    '--name',
    'summer',
    '--wait',
    '--json',
  ]);
  assert.equal(done.code, 0, done.err);
  const status = await eventually(async () => {
    const r = await cli(['mosaic', 'status', 'summer', '--json']);
    if (r.code !== 0) throw new Error(r.err);
    return JSON.parse(r.out) as { workflowId: string; status: string };
  });
  assert.deepEqual(
    [status.workflowId, status.status],
    [mosaicWorkflowId(path.join(dir, 'summer-out.tif')), 'COMPLETED'],
  );
  const watched = await cli(['mosaic', 'watch', 'mosaic/summer', '--json']);
  assert.equal(watched.code, 0, watched.err);
  assert.equal((JSON.parse(watched.out) as { counts: { ok: number } }).counts.ok, 20);
  const unknown = await cli(['mosaic', 'status', 'no-such-mosaic']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.err, /no mosaic with id or name "no-such-mosaic"/);

  // A re-drive by name: of the named mosaic's output, under the output's id (a run of its own, listed as a re-drive).
  const redrive = await cli(['mosaic', 'redrive', 'summer', '--json']);
  assert.equal(redrive.code, 0, redrive.err);
  assert.equal((JSON.parse(redrive.out) as { counts: { ok: number } }).counts.ok, 20);
  const listed = await eventually(async () => {
    const l = await listMosaics(env.client, { name: 'summer' });
    if (l.mosaics.length < 2) throw new Error(`listed ${l.mosaics.length}`);
    return l.mosaics;
  });
  assert.deepEqual(listed.map((m) => [m.type, m.workflowId]).sort(), [
    ['mosaicWorkflow', mosaicWorkflowId(path.join(dir, 'summer-out.tif'))],
    ['redriveMosaicWorkflow', mosaicWorkflowId(path.join(dir, 'summer-out.tif'))],
  ]);

  // A run an older version started, with the absolute path as its id.
  const output = path.join(dir, 'legacy.tif');
  const legacyId = legacyMosaicWorkflowId(output);
  const request: MosaicRequest = {
    sourcesFile: slowSources,
    sourceName: 'demo',
    bbox: [5.7, 44, 19.5, 49.9],
    zoom: 7,
    output,
    breaker: false,
  };
  await env.client.workflow.start('mosaicWorkflow', { taskQueue, workflowId: legacyId, args: [request] });
  const doubled = await cli(['mosaic', 'start', ...area(slowSources), '--out', output]);
  assert.equal(doubled.code, 2, doubled.out);
  assert.match(doubled.err, new RegExp(`already running as ${legacyId}`));
  const old = await cli(['mosaic', 'status', legacyId, '--json']);
  assert.equal(old.code, 0, old.err);
  assert.equal((JSON.parse(old.out) as { status: string }).status, 'RUNNING');
  const oldCancel = await cli(['mosaic', 'cancel', legacyId, '--json']);
  assert.equal(oldCancel.code, 0, oldCancel.err);
  assert.equal((JSON.parse(oldCancel.out) as { status: string }).status, 'CANCELLED');
});

/** An upsert of the Mosaic* attributes (the SDK upserts TemporalChangeVersion for patches on its own). */
function upsertsMosaicAttributes(e: {
  upsertWorkflowSearchAttributesEventAttributes?: {
    searchAttributes?: { indexedFields?: Record<string, unknown> | null } | null;
  } | null;
}): boolean {
  return Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}).some((k) =>
    k.startsWith('Mosaic'),
  );
}

function find(mosaics: ListedMosaic[], name: string): ListedMosaic {
  const m = mosaics.find((x) => x.name === name && x.type === 'mosaicWorkflow');
  assert.ok(m, `no mosaic named ${name} in ${JSON.stringify(mosaics.map((x) => x.name))}`);
  return m;
}

test('mosaic list: name, status, progress, source, zoom and start time from the search attributes, kept current by the workflow', async () => {
  const ok = await cli([
    'mosaic',
    'start',
    ...area(fastSources),
    '--out',
    path.join(dir, 'l-ok.tif'),
    '--name',
    'listed-ok',
    '--wait',
  ]);
  assert.equal(ok.code, 0, ok.err);
  // Gaps: a renderer of its own, down, behind the breaker, with fallback hole.
  const down = await startDemoTileServer({ latencyMs: 2 });
  try {
    down.setDown(true);
    const downSources = sourcesFile('down', down, 4);
    const gaps = await cli([
      'mosaic',
      'start',
      '--sources',
      downSources,
      '--source',
      'demo',
      '--bbox',
      '5.7,44,19.5,49.9',
      '--zoom',
      '7',
      '--fallback',
      'hole',
      '--out',
      path.join(dir, 'l-gaps.tif'),
      '--name',
      'listed-gaps',
      '--wait',
    ]);
    assert.equal(gaps.code, 3, gaps.err);
  } finally {
    await down.close();
  }
  const run = await cli([
    'mosaic',
    'start',
    ...area(slowSources),
    '--out',
    path.join(dir, 'l-run.tif'),
    '--name',
    'listed-run',
    '--json',
  ]);
  assert.equal(run.code, 0, run.err);
  const runId = (JSON.parse(run.out) as { workflowId: string }).workflowId;
  try {
    const all = await eventually(async () => {
      const r = await cli(['mosaic', 'list', '--json']);
      assert.equal(r.code, 0, r.err);
      // A list's JSON is one object, its rows under items (as breaker list and schedule list give theirs).
      const l = JSON.parse(r.out) as {
        items: ListedMosaic[];
        count: number;
        more: boolean;
        limit: number;
        filteredBy: string;
      };
      for (const n of ['listed-ok', 'listed-gaps', 'listed-run']) find(l.items, n);
      return l;
    });
    assert.equal(all.filteredBy, 'search-attributes');
    assert.deepEqual([all.count, all.more, all.limit], [all.items.length, false, 1000]);
    // Stopped at --limit: it says there is more.
    const one = JSON.parse((await cli(['mosaic', 'list', '--limit', '1', '--json'])).out) as {
      items: ListedMosaic[];
      count: number;
      more: boolean;
      limit: number;
    };
    assert.deepEqual([one.items.length, one.count, one.more, one.limit], [1, 1, true, 1]);
    assert.match(
      (await cli(['mosaic', 'list', '--limit', '1'])).out,
      /^\(stopped at --limit 1: the server has more runs than listed here; raise --limit to see them\)$/m,
    );
    const okRow = find(all.items, 'listed-ok');
    assert.deepEqual(
      [okRow.status, okRow.progress, okRow.source, okRow.zoom, okRow.output],
      ['completed', 100, 'demo', 7, path.join(dir, 'l-ok.tif')],
    );
    assert.ok(Date.parse(okRow.startTime) > Date.now() - 10 * 60_000);
    const gapsRow = find(all.items, 'listed-gaps');
    assert.deepEqual([gapsRow.status, gapsRow.progress], ['partial', 100]);
    const runRow = find(all.items, 'listed-run');
    assert.equal(runRow.status, 'running');
    assert.ok(runRow.progress !== null && runRow.progress < 100, JSON.stringify(runRow));

    // The server filters: partial is not completed, and running is running.
    const partial = JSON.parse((await cli(['mosaic', 'list', '--status', 'partial', '--json'])).out) as {
      items: ListedMosaic[];
      query: string;
    };
    assert.match(partial.query, /MosaicStatus = 'partial'/);
    assert.ok(partial.items.some((m) => m.name === 'listed-gaps'));
    assert.ok(!partial.items.some((m) => m.name === 'listed-ok'));
    const completed = JSON.parse((await cli(['mosaic', 'list', '--status', 'completed', '--json'])).out) as {
      items: ListedMosaic[];
    };
    assert.ok(completed.items.some((m) => m.name === 'listed-ok'));
    assert.ok(!completed.items.some((m) => m.name === 'listed-gaps' || m.name === 'listed-run'));
    const runningNow = JSON.parse((await cli(['mosaic', 'list', '--status', 'running', '--json'])).out) as {
      items: ListedMosaic[];
    };
    assert.deepEqual(
      runningNow.items.filter((m) => m.name.startsWith('listed-')).map((m) => m.name),
      ['listed-run'],
    );
    const text = await cli(['mosaic', 'list']);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /^NAME\s+STATUS\s+PROGRESS\s+SOURCE\s+ZOOM\s+STARTED\s+ID$/m);
    assert.match(
      text.out,
      /^listed-ok\s+completed\s+100%\s+demo\s+7\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+mosaic\/l-ok-[0-9a-f]{8}$/m,
    );
    const bad = await cli(['mosaic', 'list', '--status', 'done']);
    assert.equal(bad.code, 2);
    assert.match(
      bad.err,
      /--status: must be one of running, completed, partial, failed, cancelled, terminated, timed-out \(got "done"\)/,
    );

    // What the Temporal UI shows: the attributes on the run, set by the workflow at coarse steps.
    const okId = mosaicWorkflowId(path.join(dir, 'l-ok.tif'));
    const desc = await env.client.workflow.getHandle(okId).describe();
    assert.deepEqual(
      [MOSAIC_NAME, MOSAIC_SOURCE, MOSAIC_ZOOM, MOSAIC_STATUS, MOSAIC_PROGRESS].map((k) =>
        desc.typedSearchAttributes.get(k as never),
      ),
      ['listed-ok', 'demo', 7, 'completed', 100],
    );
    assert.deepEqual(desc.memo, {
      name: 'listed-ok',
      source: 'demo',
      zoom: 7,
      output: path.join(dir, 'l-ok.tif'),
      status: 'completed',
      progress: 100,
      done: 20,
      total: 20,
    });
    const events = (await env.client.workflow.getHandle(okId).fetchHistory()).events ?? [];
    const upserts = events.filter(upsertsMosaicAttributes).length;
    // After planning, at most one per 10 % of tiles, and the end: never one per batch of a large mosaic.
    assert.ok(upserts >= 2 && upserts <= 12, `upserts: ${upserts}`);
    // Started with the attributes, the run did not need to ask whether they are registered.
    assert.ok(
      !events.some(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'mosaicSearchAttributesRegistered',
      ),
    );
  } finally {
    await cli(['mosaic', 'cancel', runId]);
  }
});

test(
  'without the Mosaic* attributes registered: the memo alone, and mosaic list and names fall back to it',
  { timeout: 180_000 },
  async (t) => {
    if (process.env.TEMPORAL_ADDRESS) return t.skip('needs a dev server of its own without the attributes');
    const bare = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
    const q = uniqueTaskQueue('names-bare');
    const w = await createWorker({
      connection: bare.nativeConnection,
      client: bare.client,
      namespace: 'default',
      taskQueue: q,
      roots: TEST_ROOTS,
      breaker: BREAKER,
    });
    try {
      await w.runUntil(async () => {
        const output = path.join(dir, 'bare.tif');
        const handle = await startMosaic(
          bare.client,
          q,
          {
            sourcesFile: fastSources,
            sourceName: 'demo',
            bbox: [5.7, 44, 19.5, 49.9],
            zoom: 7,
            output,
            breaker: false,
          },
          { name: 'bare-one' },
        );
        const result = await handle.result();
        assert.equal(result.counts.ok, 20);
        const desc = await handle.describe();
        assert.equal(desc.typedSearchAttributes.get(MOSAIC_NAME), undefined);
        assert.deepEqual(desc.memo, {
          name: 'bare-one',
          source: 'demo',
          zoom: 7,
          output,
          status: 'completed',
          progress: 100,
          done: 20,
          total: 20,
        });
        const events = (await handle.fetchHistory()).events ?? [];
        // It asked once, was told no, and upserted no attribute (an unregistered one would fail its tasks).
        assert.equal(
          events.filter(
            (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'mosaicSearchAttributesRegistered',
          ).length,
          1,
        );
        assert.equal(events.filter(upsertsMosaicAttributes).length, 0);
        const listed = await eventually(async () => {
          const l = await listMosaics(bare.client, { status: 'completed' });
          find(l.mosaics, 'bare-one');
          return l;
        });
        assert.equal(listed.filteredBy, 'memo');
        assert.doesNotMatch(listed.query, /Mosaic(Name|Status)/);
        const row = find(listed.mosaics, 'bare-one');
        assert.deepEqual([row.status, row.progress, row.source, row.zoom], ['completed', 100, 'demo', 7]);
        assert.equal((await listMosaics(bare.client, { status: 'partial' })).mosaics.length, 0);
        assert.equal(await resolveMosaicId(bare.client, 'bare-one'), mosaicWorkflowId(output));
      });
    } finally {
      await bare.teardown();
    }
  },
);

test("schedule create --name: each night's run starts the mosaic under the output's id with the name, source and zoom for its memo and search attributes", async () => {
  const request = path.join(dir, 'nightly.yaml');
  writeFileSync(
    request,
    `sourcesFile: ${fastSources}\nsourceName: demo\nbbox: [5.7, 44, 19.5, 49.9]\nzoom: 7\noutput: ${path.join(dir, 'nightly.tif')}\n`,
  );
  const bad = await cli([
    'schedule',
    'create',
    'names-nightly',
    '--cron',
    '0 2 * * *',
    '--request',
    request,
    '--name',
    'bad name',
  ]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--name: a mosaic name is .* \(got "bad name"\)/);
  const r = await cli([
    'schedule',
    'create',
    'names-nightly',
    '--cron',
    '0 2 * * *',
    '--request',
    request,
    '--name',
    'alps-nightly',
    '--json',
  ]);
  assert.equal(r.code, 0, r.err);
  assert.equal((JSON.parse(r.out) as { name: string }).name, 'alps-nightly');
  try {
    const d = await env.client.schedule.getHandle('names-nightly').describe();
    const action = d.action as { workflowType?: string; args?: unknown[]; memo?: Record<string, unknown> };
    assert.equal(action.workflowType, 'scheduledMosaicWorkflow');
    assert.deepEqual(action.memo, {
      name: 'alps-nightly',
      output: path.join(dir, 'nightly.tif'),
      schedule: 'names-nightly',
      state: 'starting',
    });
    const input = action.args?.[0] as { workflowId: string; overlap: string; label: unknown; attributes: boolean };
    assert.deepEqual(
      [input.workflowId, input.overlap, input.label, input.attributes],
      [
        mosaicWorkflowId(path.join(dir, 'nightly.tif')),
        'skip',
        { name: 'alps-nightly', source: 'demo', zoom: 7, output: path.join(dir, 'nightly.tif') },
        true,
      ],
    );
  } finally {
    await deleteSchedule(env.client, 'names-nightly');
  }
});
