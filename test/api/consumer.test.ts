/**
 * tilebreaker as a package, used the way another project uses it: a consumer folder with
 * node_modules/tilebreaker (a symlink to this package), @temporalio and @types as an install would have
 * them, the examples of docs/library.md ("Use it from your own code") written out as files, type-checked with TypeScript's node16
 * resolution (through the exports map and its `types` conditions) and run with node against a dev server.
 * The doc's worker example is the worker here, so the mosaic example runs on a worker built with
 * `workflowsPath` resolved from 'tilebreaker/workflows'. The rest of the API this test calls itself is
 * imported by the package's own name too.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  adminBreaker,
  breakerKey,
  breakerStatus,
  BREAKER_SEARCH_ATTRIBUTES,
  cancelMosaic,
  configureBreaker,
  listBreakers,
  mosaicStatus,
  startMosaic,
  watchMosaic,
} from 'tilebreaker';
import { recordHistory, replayHistoryFile } from 'tilebreaker/testing';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const root = path.join(__dirname, '..', '..', '..');
const docs = [path.join(root, 'docs', 'library.md'), path.join(root, 'README.md')];
const EXAMPLES = [
  'start-mosaic.mts',
  'breaker-state.mts',
  'replay.test.mts',
  'my-worker.mts',
  'geocoder-worker.mts',
  'geocode-workflows.ts',
];

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-consumer-'));
const taskQueue = uniqueTaskQueue('consumer');
let env: TestWorkflowEnvironment;
let server: DemoTileServer;
let slow: DemoTileServer;
let worker: ChildProcess | undefined;
let workerLog = '';
let mosaicId = '';

/** The docs' ```ts blocks whose first line names a file (`// start-mosaic.mts`), by that name. */
function docExamples(): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const doc of docs)
    for (const m of readFileSync(doc, 'utf8').matchAll(/```ts\n(\/\/ ([\w.-]+)\n[\s\S]*?)```/g))
      blocks.set(m[2]!, m[1]!);
  return blocks;
}

function run(args: string[], opts: { timeoutMs?: number } = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: dir, env: exampleEnv(), timeout: opts.timeoutMs ?? 120_000, maxBuffer: 16 << 20 },
      (err, out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

/** What the examples read: this test's server and task queue; no roots given, so the worker's are its working directory (the consumer folder). */
function exampleEnv(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_NAMESPACE: 'default',
    TILEBREAKER_TASK_QUEUE: taskQueue,
  };
  for (const k of [
    'TILEBREAKER_SOURCES_DIR',
    'TILEBREAKER_OUTPUT_DIR',
    'TEMPORAL_API_KEY',
    'TEMPORAL_TLS',
    'TEMPORAL_TLS_CERT',
    'TEMPORAL_TLS_KEY',
    'TEMPORAL_TLS_CA',
  ])
    delete e[k];
  // Not a subtest of this run: `node --test` in an example reports as a test run of its own.
  delete e['NODE_TEST_CONTEXT'];
  return e;
}

async function waitFor<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  server = await startDemoTileServer({ latencyMs: 2 });
  slow = await startDemoTileServer({ latencyMs: 400 });

  // As `npm install tilebreaker` would leave it (the SDK and @types beside it); Node resolves the symlink to
  // this package, so its "exports" are what a consumer gets.
  mkdirSync(path.join(dir, 'node_modules'));
  symlinkSync(root, path.join(dir, 'node_modules', 'tilebreaker'), 'dir');
  for (const scope of ['@temporalio', '@types'])
    symlinkSync(path.join(root, 'node_modules', scope), path.join(dir, 'node_modules', scope), 'dir');
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'node16',
        moduleResolution: 'node16',
        lib: ['ES2022'],
        types: ['node'],
        strict: true,
        rootDir: '.',
        outDir: 'build',
        skipLibCheck: true,
      },
      include: ['*.ts', '*.mts'],
    }),
  );
  for (const [name, code] of docExamples()) writeFileSync(path.join(dir, name), code);
  // Beside the doc's examples: a CommonJS consumer of the client side, a workflows module of the consumer's
  // own that re-exports tilebreaker's, and bundling both as a worker would.
  writeFileSync(
    path.join(dir, 'client-only.ts'),
    `import { breakerKey, startMosaic } from 'tilebreaker';
const unwanted = /node_modules\\/(@temporalio\\/(worker|testing|activity|core-bridge)|sharp|undici)\\/|dist\\/src\\/(activities|workflows|api|cli)\\//;
console.log(JSON.stringify({
  startMosaic: typeof startMosaic,
  key: breakerKey('HTTPS://Tiles.Example.com/{z}/{x}/{y}.png'),
  loaded: Object.keys(require.cache).filter((f) => unwanted.test(f)),
  resolved: ['tilebreaker', 'tilebreaker/workflows', 'tilebreaker/activities', 'tilebreaker/testing'].map((s) => require.resolve(s)),
}));
`,
  );
  writeFileSync(
    path.join(dir, 'my-workflows.ts'),
    `export * from 'tilebreaker/workflows';

export async function greet(name: string): Promise<string> {
  return \`hello \${name}\`;
}
`,
  );
  writeFileSync(
    path.join(dir, 'bundle.ts'),
    `import { bundleWorkflowCode } from '@temporalio/worker';

async function main(): Promise<void> {
  const out = [];
  for (const workflowsPath of [require.resolve('tilebreaker/workflows'), require.resolve('./my-workflows')]) {
    const { code } = await bundleWorkflowCode({ workflowsPath });
    out.push({ workflowsPath, mosaicWorkflow: code.includes('mosaicWorkflow'), greet: code.includes('hello ') });
  }
  console.log(JSON.stringify(out));
}
main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
`,
  );
  writeFileSync(
    path.join(dir, 'sources.yaml'),
    `sources:\n  osm:\n    type: xyz\n    url: ${server.template}\n    concurrency: 4\n  slow:\n    type: xyz\n    url: ${slow.template}\n    concurrency: 1\n`,
  );
  mkdirSync(path.join(dir, 'histories'));
  for (const f of ['drill-outage.json', 'mosaic-blocks.json'])
    copyFileSync(path.join(root, 'test', 'histories', f), path.join(dir, 'histories', f));
});

after(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((r) => worker!.once('exit', r));
    worker.kill('SIGINT');
    const timer = setTimeout(() => worker!.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
  await env?.teardown();
  await server?.close();
  await slow?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the doc has the examples, each a ```ts block named by its first line', () => {
  assert.deepEqual([...docExamples().keys()].sort(), [...EXAMPLES].sort());
});

test("the examples type-check as a consumer's code: TypeScript node16 resolution through the exports map and its types", async () => {
  const r = await run([path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
    timeoutMs: 180_000,
  });
  assert.equal(r.code, 0, `${r.out}\n${r.err}`);
  for (const f of [
    'start-mosaic.mjs',
    'breaker-state.mjs',
    'replay.test.mjs',
    'my-worker.mjs',
    'geocoder-worker.mjs',
    'geocode-workflows.js',
    'client-only.js',
    'bundle.js',
  ])
    assert.ok(existsSync(path.join(dir, 'build', f)), f);
});

test('CommonJS: every entry point resolves, and tilebreaker loads no worker, activity or workflow code', async () => {
  const r = await run(['build/client-only.js']);
  assert.equal(r.code, 0, r.err);
  const got = JSON.parse(r.out) as { startMosaic: string; key: string; loaded: string[]; resolved: string[] };
  assert.equal(got.startMosaic, 'function');
  assert.equal(got.key, 'https://tiles.example.com:443');
  assert.deepEqual(got.loaded, []);
  assert.deepEqual(
    got.resolved.map((f) => path.relative(root, f)),
    ['dist/src/index.js', 'dist/src/workflows/index.js', 'dist/src/api/activities.js', 'dist/src/api/testing.js'],
  );
  const deep = await run(['-e', "require('tilebreaker/dist/src/index.js')"]);
  assert.match(deep.err, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
});

test("require.resolve('tilebreaker/workflows'), and a workflows module of the consumer's that re-exports it, bundle for a worker", async () => {
  const r = await run(['build/bundle.js'], { timeoutMs: 180_000 });
  assert.equal(r.code, 0, r.err);
  const [direct, mine] = JSON.parse(r.out.trim().split('\n').pop()!) as { mosaicWorkflow: boolean; greet: boolean }[];
  assert.deepEqual(direct, {
    workflowsPath: path.join(root, 'dist', 'src', 'workflows', 'index.js'),
    mosaicWorkflow: true,
    greet: false,
  });
  assert.deepEqual(
    { ...mine, workflowsPath: undefined },
    { workflowsPath: undefined, mosaicWorkflow: true, greet: true },
  );
});

test("the doc's worker runs, and the doc's mosaic example starts a mosaic on it and awaits its result", async () => {
  worker = spawn(process.execPath, ['build/my-worker.mjs'], {
    cwd: dir,
    env: exampleEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout!.on('data', (d: Buffer) => (workerLog += d.toString()));
  worker.stderr!.on('data', (d: Buffer) => (workerLog += d.toString()));
  const r = await run(['build/start-mosaic.mjs'], { timeoutMs: 180_000 });
  assert.equal(r.code, 0, `${r.out}\n${r.err}\nworker:\n${workerLog}`);
  assert.match(r.out, /^started (mosaic\/\S+)$/m);
  mosaicId = /^started (mosaic\/\S+)$/m.exec(r.out)![1]!;
  assert.match(
    r.out,
    new RegExp(
      `^20 tiles: ok 20, hole 0; ${path.join(dir, 'alps-z7.tif').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`,
      'm',
    ),
  );
  assert.ok(existsSync(path.join(dir, 'alps-z7.tif')));
  assert.ok(existsSync(path.join(dir, 'alps-z7.manifest.json')));
  assert.equal(worker.exitCode, null, 'the worker keeps running');
});

test("the doc's breaker example reads each breaker's state and transitions; admin actions and configure", async () => {
  const key = breakerKey(server.template);
  // The worker's guard reports the mosaic's outcomes within a second, which starts the key's entity.
  await waitFor('the entity to be listed', async () =>
    (await listBreakers(env.client)).breakers.some((b) => b.key === key),
  );
  const opened = await adminBreaker(env.client, key, 'force-open', { reason: 'maintenance', actor: 'consumer-test' });
  assert.ok(opened.confirmed);
  assert.equal(opened.status.view.state, 'forced-open');
  const reset = await adminBreaker(env.client, key, 'reset', { reason: 'done', actor: 'consumer-test' });
  assert.ok(reset.confirmed);
  const configured = await configureBreaker(env.client, key, { minSamples: 7 }, { actor: 'consumer-test' });
  assert.ok(configured.confirmed);
  assert.equal(configured.status.config.minSamples, 7);
  assert.equal(configured.transition?.reason, 'configured');
  // A change the policy would refuse is refused here, naming the field, and never sent.
  await assert.rejects(configureBreaker(env.client, key, { failureRatio: 7 }), /failureRatio/);

  const r = await run(['build/breaker-state.mjs']);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.split('\n');
  const at = lines.findIndex((l) => l.startsWith(`${key}: `));
  assert.ok(at >= 0, r.out);
  // Closed, nothing failed; the call count depends on whether the guard's last report of the mosaic landed
  // before or after the reset (seen both ways in CI).
  assert.match(lines[at]!, /: closed, 0 of \d+ calls failed$/);
  const log = lines.slice(at + 1, at + 4).map((l) => /^ {2}\S+ (\S+ -> \S+ \(\S+\))/.exec(l)?.[1]);
  assert.deepEqual(
    log,
    ['closed -> closed (configured)', 'forced-open -> closed (reset)', 'closed -> forced-open (forced-open)'],
    r.out,
  );
  assert.match(lines[at + 3]!, /maintenance \(by "consumer-test", claimed; sent by /);
});

test('watchMosaic follows a mosaic and cancelMosaic stops it, with a partial manifest', async () => {
  const output = path.join(dir, 'cancelled.tif');
  const handle = await startMosaic(env.client, taskQueue, {
    sourcesFile: path.join(dir, 'sources.yaml'),
    sourceName: 'slow',
    bbox: [5.7, 44, 19.5, 49.9],
    zoom: 8,
    output,
    batchSize: 8,
    parallelBatches: 1,
  });
  const seen: string[] = [];
  const watching = watchMosaic(env.client, handle.workflowId, {
    intervalMs: 200,
    onStatus: (s) => void seen.push(s.status),
  });
  await waitFor(
    'the first tiles',
    async () => ((await mosaicStatus(env.client, handle.workflowId)).progress?.done ?? 0) > 0,
    60_000,
  );
  const cancelled = await cancelMosaic(env.client, handle.workflowId);
  assert.equal(cancelled.status, 'CANCELLED');
  assert.equal(cancelled.result, null);
  const last = await watching;
  assert.equal(last.status, 'CANCELLED');
  assert.ok(seen.length >= 2 && seen[0] === 'RUNNING' && seen.at(-1) === 'CANCELLED', seen.join(','));
  assert.ok(existsSync(path.join(dir, 'cancelled.manifest.json')));
});

test("the doc's replay test passes on histories recorded with recordHistory, and a changed history fails to replay", async () => {
  assert.ok(mosaicId, 'the mosaic example ran');
  const rec = await recordHistory(env.client, mosaicId, path.join(dir, 'histories', 'alps.json'));
  assert.ok(rec.events > 10);
  const r = await run(['--test', 'build/replay.test.mjs'], { timeoutMs: 180_000 });
  assert.equal(r.code, 0, `${r.out}\n${r.err}`);
  assert.match(r.out, /^# pass 1$/m);

  // The same history with its first activity renamed: the workflow code no longer matches it.
  const json = JSON.parse(readFileSync(rec.file, 'utf8')) as {
    events: { activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[];
  };
  const scheduled = json.events.find((e) => e.activityTaskScheduledEventAttributes?.activityType.name === 'planMosaic');
  assert.ok(scheduled, 'the history schedules planMosaic');
  scheduled.activityTaskScheduledEventAttributes!.activityType.name = 'planSomethingElse';
  const changed = path.join(dir, 'changed.json');
  writeFileSync(changed, JSON.stringify(json));
  await assert.rejects(replayHistoryFile(changed), (err: Error) => err.name === 'DeterminismViolationError');
  await replayHistoryFile(rec.file);
});

test("the README's geocoding worker: a primary and a fallback geocoder, each behind its breaker, through an outage of the primary", async (t) => {
  assert.ok(worker && worker.exitCode === null, "the doc's worker runs the breaker entities");
  const bern = { lon: 7.4474, lat: 46.948, crs: 'EPSG:4326' };
  const geocoders = await Promise.all(
    [0, 1].map(async () => {
      const g = { mode: 'ok' as 'ok' | 'down' | 'web-mercator', requests: 0, url: '', server: createServer() };
      g.server.on('request', (_req, res) => {
        g.requests++;
        if (g.mode === 'down') return void res.writeHead(503).end();
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(g.mode === 'ok' ? bern : { lon: 829_040, lat: 5_933_537, crs: 'EPSG:3857' }));
      });
      await new Promise<void>((r) => g.server.listen(0, '127.0.0.1', r));
      g.url = `http://127.0.0.1:${(g.server.address() as AddressInfo).port}/`;
      return g;
    }),
  );
  const [primary, fallback] = geocoders as [(typeof geocoders)[0], (typeof geocoders)[0]];
  let log = '';
  const geo = spawn(process.execPath, ['build/geocoder-worker.mjs'], {
    cwd: dir,
    env: { ...exampleEnv(), GEOCODER_PRIMARY: primary.url, GEOCODER_FALLBACK: fallback.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  geo.stdout.on('data', (d: Buffer) => (log += d.toString()));
  geo.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const places = (n: number) => Array.from({ length: n }, (_, i) => `place ${i}`);
  const geocode = (id: string, n: number) =>
    env.client.workflow.execute('geocodePlaces', {
      taskQueue: 'geocoding',
      workflowId: `geocode-${id}-${Date.now()}`,
      args: [places(n)],
      workflowExecutionTimeout: '2 min',
    }) as Promise<{ lon: number; lat: number; provider: string }[]>;
  try {
    const healthy = await geocode('healthy', 3);
    assert.deepEqual(
      healthy.map((p) => p.provider),
      ['geocoder:primary', 'geocoder:primary', 'geocoder:primary'],
      log,
    );
    assert.equal(fallback.requests, 0);

    primary.mode = 'down';
    const before = primary.requests;
    const during = await geocode('outage', 40);
    assert.equal(during.length, 40, 'every place was geocoded');
    assert.ok(
      during.every((p) => p.provider === 'geocoder:fallback' && p.lon === bern.lon),
      JSON.stringify(during.map((p) => p.provider)),
    );
    const sent = primary.requests - before;
    t.diagnostic(`outage of the primary: ${sent} requests to it for 40 places, all 40 answered by the fallback`);
    assert.ok(sent < 40, `the primary's breaker opened and spared it: ${sent} requests for 40 places`);
    const status = await breakerStatus(env.client, 'geocoder:primary');
    assert.equal(status.view.state, 'open');

    // A fallback that answers in the wrong CRS is never returned: with the primary open too, the activity fails.
    fallback.mode = 'web-mercator';
    await assert.rejects(
      env.client.workflow.execute('geocodePlaces', {
        taskQueue: 'geocoding',
        workflowId: `geocode-wrong-${Date.now()}`,
        args: [['Bern']],
        workflowExecutionTimeout: '5 s',
      }),
    );
  } finally {
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      geo.once('exit', (code, signal) => r([code, signal])),
    );
    geo.kill('SIGINT');
    const timer = setTimeout(() => geo.kill('SIGKILL'), 30_000);
    const [code] = await exited;
    clearTimeout(timer);
    await Promise.all(geocoders.map((g) => new Promise((r) => g.server.close(r))));
    assert.equal(code, 0, log);
  }
});

test("the doc's worker stops on SIGINT: it drains, closes the activity runtime and its connections, and exits 0", async () => {
  assert.ok(worker && worker.exitCode === null, 'the worker is running');
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((r) =>
    worker!.once('exit', (code, signal) => r([code, signal])),
  );
  worker.kill('SIGINT');
  const timer = setTimeout(() => worker!.kill('SIGKILL'), 30_000);
  const [code, signal] = await exited;
  clearTimeout(timer);
  assert.deepEqual([code, signal], [0, null], workerLog);
});
