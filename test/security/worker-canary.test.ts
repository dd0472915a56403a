/**
 * What a requester who can start workflows (or write a request file) can make a worker show or do, tried on a
 * real Temporal server: workflows started directly, not through the CLI, and the CLI too. A canary in the
 * files they point at must appear in no history, failure, worker log line or CLI output.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import type { mosaicWorkflow } from '../../src/workflows/mosaic';
import { captureWorkerLogs, devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const CANARY = 'CANARY-b41d9e07';
const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-canary-'));
const conf = path.join(dir, 'conf');
const out = path.join(dir, 'out');
const elsewhere = path.join(dir, 'elsewhere');
for (const d of [conf, out, elsewhere]) mkdirSync(d);
const taskQueue = uniqueTaskQueue('canary');
const logs = captureWorkerLogs();
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let server: DemoTileServer;
/** The block handed a plan outside the roots (its test awaits it). */
let rootsBlock: Promise<WorkflowHandle>;

/** Files a requester might point a worker at, each holding the canary. */
const bait = {
  env: `SECRET=${CANARY}\nDATABASE_URL=postgres://app:${CANARY}@db/app\n`,
  key: `-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ${CANARY}AAAAAAAAAAAAAAAAAAA\n-----END OPENSSH PRIVATE KEY-----\n`,
  passwd: `root:x:0:0:root:/root:/bin/bash\n${CANARY}:x:1000:1000::/home/${CANARY}:/bin/sh\n`,
  gitConfig: `[core]\n\tbare = false\n[remote "origin"]\n\turl = https://deploy:${CANARY}@git.example.org/maps.git\n`,
  json: `{"token": ${CANARY}}`,
  credsInSource: `sources:\n  osm:\n    type: xyz\n    url: http://ops:${CANARY}@127.0.0.1:9/{z}/{x}/{y}.png\n    headers:\n      Authorization: Bearer ${CANARY}\n`,
};
const baitFiles: Record<string, string> = {};

before(async () => {
  env = await devServerEnv();
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: { sources: [conf], outputs: [out] },
  });
  running = worker.run();
  server = await startDemoTileServer({ latencyMs: 1 });
  for (const [name, text] of Object.entries(bait)) {
    baitFiles[name] = path.join(conf, `${name}.${name === 'json' ? 'json' : 'yaml'}`);
    writeFileSync(baitFiles[name], text);
  }
  // Its batch is refused on each of its attempts (about 30 s of retries): started now, the tests before its own overlap them.
  rootsBlock = env.client.workflow.start('mosaicBlockWorkflow', {
    taskQueue,
    workflowId: `canary-block-${process.pid}`,
    args: [{ plan: forgedPlan(elsewhere, 'tiles'), tiles: { start: 0, count: 1 }, tag: 'b0', basePass: 0 }],
  });
  rootsBlock.catch(() => undefined); // awaited by its test
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const request = (extra: Partial<MosaicRequest>): MosaicRequest => ({
  bbox: [5.7, 44.0, 6.5, 44.6],
  zoom: 6,
  output: path.join(out, 'm.tif'),
  ...extra,
});

/** Every string in a history: fields as exported, and each payload's bytes decoded. */
function historyText(value: unknown, acc: string[] = []): string[] {
  if (value instanceof Uint8Array) acc.push(Buffer.from(value).toString('utf8'));
  else if (typeof value === 'string') acc.push(value);
  else if (Array.isArray(value)) value.forEach((v) => historyText(v, acc));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => historyText(v, acc));
  return acc;
}

/** Runs a workflow to its failure; returns the failure's whole text (causes included) and its history's text. */
async function failureOf(handle: WorkflowHandle): Promise<{ failure: string; history: string }> {
  let failure = '';
  try {
    await handle.result();
    assert.fail('the workflow should have failed');
  } catch (err) {
    assert.ok(err instanceof WorkflowFailedError, String(err));
    for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause)
      failure += `${e.name}: ${e.message}${'type' in e ? ` (${String(e.type)})` : ''}\n`;
  }
  const history = historyText(await handle.fetchHistory()).join('\n');
  return { failure, history };
}

function assertClean(what: string, ...texts: string[]): void {
  for (const t of texts)
    assert.ok(
      !t.includes(CANARY),
      `${what}: the canary leaked:\n${t.slice(Math.max(0, t.indexOf(CANARY) - 300), t.indexOf(CANARY) + 100)}`,
    );
}

function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
    );
  });
}

test('a workflow started directly with sourcesFile at a file that is not a sources file: refused, and the file is quoted nowhere', async () => {
  for (const [name, file] of Object.entries(baitFiles)) {
    const handle = await env.client.workflow.start('mosaicWorkflow', {
      taskQueue,
      workflowId: `canary-${name}-${process.pid}`,
      args: [request({ sourcesFile: file })],
    });
    const { failure, history } = await failureOf(handle);
    assert.match(failure, /ApplicationFailure: (mosaic request|sources file .*): /, name);
    assert.ok(failure.includes(file), `${name}: the failure names the file: ${failure}`);
    assertClean(`${name}: failure`, failure);
    assertClean(`${name}: history`, history);
  }
  assertClean('worker log', logs.join('\n'));
  assert.ok(
    logs.some((l) => l.includes('ConfigError')),
    'the worker did log the refusals (the log check looked at something)',
  );
});

test('a sources file outside the sources roots, or reached through a symlink out of them, is refused before it is read', async () => {
  const outside = path.join(elsewhere, 'sources.yaml');
  writeFileSync(outside, bait.env);
  symlinkSync(outside, path.join(conf, 'link.yaml'));
  for (const [name, file] of [
    ['outside', outside],
    ['link', path.join(conf, 'link.yaml')],
    ['etc', '/etc/passwd'],
  ] as const) {
    const handle = await env.client.workflow.start('mosaicWorkflow', {
      taskQueue,
      workflowId: `canary-root-${name}-${process.pid}`,
      args: [request({ sourcesFile: file })],
    });
    const { failure } = await failureOf(handle);
    assert.match(
      failure,
      /sourcesFile: ".*" (is outside|leads outside this worker's roots .* through a symlink|must name a \.yaml)/,
      failure,
    );
    assertClean(name, failure);
  }
});

test('outputs outside the output roots, under /proc, or with a source named "..": refused at planning within seconds, nothing written', async () => {
  const source = { type: 'xyz', url: server.template } as const;
  const cases: [string, Partial<MosaicRequest>, RegExp][] = [
    [
      'proc',
      { source, output: '/proc/self/cwd/wedge.tif' },
      /output: "\/proc\/self\/cwd\/wedge\.tif" (lies under|is outside)/,
    ],
    [
      'outside',
      { source, output: path.join(elsewhere, 'm.tif') },
      /output: ".*elsewhere\/m\.tif" is outside this worker's roots/,
    ],
    ['store', { source, storeRoot: '/var/tmp/tilebreaker-escape' }, /storeRoot: .* is outside/],
    ['dotdot', { source, sourceName: '..' }, /sourceName: must be a source name/],
  ];
  for (const [name, extra, expected] of cases) {
    const started = Date.now();
    const handle = await env.client.workflow.start('mosaicWorkflow', {
      taskQueue,
      workflowId: `canary-out-${name}-${process.pid}`,
      args: [request(extra)],
    });
    const { failure } = await failureOf(handle);
    assert.match(failure, expected, name);
    // A hang guard, not a speed target: the old code spun in mkdir for three activity timeouts.
    assert.ok(Date.now() - started < 30_000, `${name} took ${Date.now() - started} ms`);
  }
  assert.ok(!existsSync(path.join(elsewhere, 'm.work')));
  assert.ok(!existsSync('/var/tmp/tilebreaker-escape'));
});

/** A one-tile plan as a requester might hand a block workflow, its folders in `dir`. */
function forgedPlan(dir: string, store: string) {
  return {
    sourceName: 'x',
    source: { type: 'xyz', url: server.template },
    grid: { z: 1, tileSize: 256, xMin: 0, xMax: 0, yMin: 0, yMax: 0 },
    total: 1,
    bounds: { minX: 0, minY: 0, maxX: 1, maxY: 1 },
    output: path.join(dir, 'b.tif'),
    extraFormats: [],
    workDir: path.join(dir, 'b.work'),
    journalDir: path.join(dir, 'b.work', 'j'),
    storeRoot: path.join(dir, store),
    fallback: 'fail-fast',
    afterDeadline: 'fail-fast',
    deadlineAt: null,
    batchSize: 1,
    blockTiles: 1,
    parallelBatches: 1,
    breaker: false,
  };
}

test("credentials go only where an operator's sources file sends them: an inline source or a forged plan cannot pair a worker secret with a URL", async () => {
  const seen: string[] = [];
  const thief = createServer((req, res) => {
    seen.push(`${req.url} ${JSON.stringify(req.headers)}`);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => thief.listen(0, '127.0.0.1', r));
  process.env.TB_CANARY_SECRET = CANARY;
  try {
    const url = `http://127.0.0.1:${(thief.address() as AddressInfo).port}/{z}/{x}/{y}.png`;
    const auth = { type: 'bearer', tokenEnv: 'TB_CANARY_SECRET' } as const;
    // An inline source with auth is refused at planning.
    const inline = await env.client.workflow.start('mosaicWorkflow', {
      taskQueue,
      workflowId: `canary-auth-inline-${process.pid}`,
      args: [request({ source: { type: 'xyz', url, auth } })],
    });
    assert.match(
      (await failureOf(inline)).failure,
      /source\.auth: credentials are used only with sources read from a sources file/,
    );
    // A block handed a plan whose source carries auth: without a sources file, or differing from it.
    writeFileSync(
      path.join(conf, 'real.yaml'),
      `sources:\n  real:\n    type: xyz\n    url: ${server.template}\n    auth: { type: bearer, tokenEnv: TB_CANARY_SECRET }\n`,
    );
    const good = await env.client.workflow.execute<typeof mosaicWorkflow>('mosaicWorkflow', {
      taskQueue,
      workflowId: `canary-auth-good-${process.pid}`,
      args: [request({ sourcesFile: path.join(conf, 'real.yaml'), output: path.join(out, 'real.tif'), zoom: 4 })],
    });
    assert.ok(good.counts.ok > 0, 'a source from the sources file does use its credential');
    const plan = JSON.parse(readFileSync(path.join(out, 'real.work', 'plan.json'), 'utf8')) as Record<string, unknown>;
    // At once: each block's batch is refused on every one of its attempts (about 30 s of retries).
    const forgeries = [
      ['no-file', { ...plan, source: { ...(plan.source as object), url }, sourcesFile: undefined }],
      ['other-url', { ...plan, source: { ...(plan.source as object), url } }],
      // A mirror is a source too: one carrying the credential to another host is refused as the source would be.
      [
        'mirror',
        {
          ...plan,
          mirrors: [{ name: 'real', source: { ...(plan.source as object), url }, usable: true, reason: 'forged' }],
        },
      ],
    ] as const;
    await Promise.all(
      forgeries.map(async ([name, forged]) => {
        const h = await env.client.workflow.start('mosaicBlockWorkflow', {
          taskQueue,
          workflowId: `canary-auth-${name}-${process.pid}`,
          args: [{ plan: forged, tiles: { start: 0, count: 1 }, tag: 'b0', basePass: 0 }],
        });
        const { failure } = await failureOf(h);
        assert.match(
          failure,
          name === 'no-file' ? /names no sources file/ : /differs from the one in .*real\.yaml as it is now/,
          `${name}: ${failure}`,
        );
      }),
    );
    assert.deepEqual(seen, [], 'the other host received nothing');
  } finally {
    delete process.env.TB_CANARY_SECRET;
    await new Promise((r) => thief.close(r));
  }
});

test('a block workflow handed a plan of its own making is held to the same roots', async () => {
  const { failure } = await failureOf(await rootsBlock);
  assert.match(failure, /mosaic batch: output: ".*elsewhere\/b\.tif" is outside this worker's roots/);
  assert.ok(
    !existsSync(path.join(elsewhere, 'tiles')) && !existsSync(path.join(elsewhere, 'b.work')),
    'nothing written outside the roots',
  );
});

test('a block handed a malformed plan or selection is refused before it loops: strings in the grid, a zero batch size, tiles beyond the plan', async () => {
  const base = forgedPlan(out, 'b.tiles');
  const cases: [string, Record<string, unknown>, unknown, RegExp][] = [
    [
      'grid-string',
      { ...base, grid: { ...base.grid, z: '../../../elsewhere/PWNED' } },
      { start: 0, count: 1 },
      /plan: grid\.z: .*expected number/,
    ],
    ['batch-zero', { ...base, batchSize: 0 }, { start: 0, count: 1 }, /plan: batchSize: .*>=1/],
    ['beyond', base, { start: 0, count: 1_000_000_000 }, /mosaic block: tiles/],
    ['total', { ...base, total: 5 }, { start: 0, count: 1 }, /total: must be the number of tiles of the grid/],
  ];
  for (const [name, plan, tiles, expected] of cases) {
    const started = Date.now();
    const h = await env.client.workflow.start('mosaicBlockWorkflow', {
      taskQueue,
      workflowId: `canary-plan-${name}-${process.pid}`,
      args: [{ plan, tiles, tag: 'b0', basePass: 0 }],
    });
    const { failure } = await failureOf(h);
    assert.match(failure, expected, `${name}: ${failure}`);
    assert.ok(Date.now() - started < 30_000, `${name} took ${Date.now() - started} ms`);
  }
  assert.ok(!existsSync(path.join(elsewhere, 'PWNED')));
});

/** `mosaic start --wait` through the CLI, for a small area, with the sources file given. */
function cliMosaic(sources: string, name: string) {
  return cli([
    'mosaic',
    'start',
    '--sources',
    sources,
    '--bbox',
    '5.7,44,6.5,44.6',
    '--zoom',
    '6',
    '--out',
    path.join(out, `${name}.tif`),
    '--id',
    `canary-${name}-${process.pid}`,
    '--wait',
  ]);
}

test('the CLI: mosaic start and redrive with --sources at a bait file print no canary, and tile --source neither', async () => {
  const start = await cliMosaic(baitFiles.env!, 'cli');
  assert.equal(start.code, 2, start.out + start.err);
  assert.match(start.out + start.err, /not a sources file/);
  assertClean('mosaic start', start.out, start.err);

  // A real mosaic, then a re-drive reading a bait file as its new source.
  writeFileSync(path.join(conf, 'good.yaml'), `sources:\n  demo:\n    type: xyz\n    url: ${server.template}\n`);
  const good = await cliMosaic(path.join(conf, 'good.yaml'), 'good');
  assert.equal(good.code, 0, good.out + good.err);
  const redrive = await cli([
    'mosaic',
    'redrive',
    path.join(out, 'good.manifest.json'),
    '--sources',
    baitFiles.gitConfig!,
    '--id',
    `canary-redrive-${process.pid}`,
  ]);
  assert.notEqual(redrive.code, 0);
  assert.match(redrive.out + redrive.err, /git-?[cC]onfig\.yaml/);
  assertClean('mosaic redrive', redrive.out, redrive.err);

  for (const file of Object.values(baitFiles)) {
    const tile = await cli(['tile', '1/0/0', '--source', file]);
    assert.equal(tile.code, 2, tile.out + tile.err);
    assertClean(`tile --source ${path.basename(file)}`, tile.out, tile.err);
  }
  assertClean('worker log', logs.join('\n'));
});
