import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { defaultBuildId } from '../../src/client/versioning';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-json-'));
let env: TestWorkflowEnvironment;

before(async () => {
  env = await devServerEnv(ALL_SEARCH_ATTRIBUTES);
});
after(async () => {
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

function cli(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, ...extraEnv }, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 },
      (err, out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

/** The subcommands `--help` lists (`help` itself aside). */
function commandsIn(help: string): string[] {
  const section = help.split(/^Commands:$/m)[1] ?? '';
  return section
    .split('\n')
    .map((l) => /^ {2}(\S+)/.exec(l)?.[1])
    .filter((c): c is string => c !== undefined && c !== 'help');
}

test('every command takes --json: each leaf command of --help lists it', async () => {
  const top = await cli(['--help']);
  assert.equal(top.code, 0, top.err);
  const missing: string[] = [];
  let leaves = 0;
  for (const c of commandsIn(top.out)) {
    const h = await cli([c, '--help']);
    const subs = commandsIn(h.out);
    const paths = subs.length > 0 ? subs.map((s) => [c, s]) : [[c]];
    for (const p of paths) {
      const leaf = p.length === 1 ? h : await cli([...p, '--help']);
      leaves++;
      if (!/^\s+--json\b/m.test(leaf.out)) missing.push(p.join(' '));
    }
  }
  assert.ok(leaves >= 19, `only ${leaves} commands found`);
  assert.deepEqual(missing, []);
});

test(
  'worker --json: its start banner is one JSON line on stdout with address, namespace, task queue, identity and roots',
  { timeout: 120_000 },
  async () => {
    const taskQueue = uniqueTaskQueue('json-worker');
    const worker = spawn(process.execPath, [main, 'worker', '--json', '--sources-dir', dir, '--output-dir', dir], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    worker.stdout.on('data', (d: Buffer) => (out += d.toString()));
    worker.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      const end = Date.now() + 90_000;
      while (!out.includes('\n')) {
        if (Date.now() > end || worker.exitCode !== null) throw new Error(`no banner; stdout: ${out}\nstderr: ${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const banner = JSON.parse(out.split('\n')[0]!) as Record<string, unknown>;
      assert.equal(banner['event'], 'worker started');
      assert.equal(banner['address'], env.address);
      assert.equal(banner['namespace'], 'default');
      assert.equal(banner['taskQueue'], taskQueue);
      assert.match(String(banner['identity']), /\S+/);
      assert.deepEqual(banner['roots'], { sources: [dir], outputs: [dir], buckets: [] });
      // A build of the Worker Deployment named after its task queue, promoting itself (docs/upgrading.md).
      assert.deepEqual(banner['deployment'], { deploymentName: taskQueue, buildId: defaultBuildId(), promote: 'auto' });
      assert.ok(!Number.isNaN(Date.parse(String(banner['time']))));
      // And the text banner is not printed beside it.
      assert.doesNotMatch(err, /^tilebreaker worker: /m);
      worker.kill('SIGTERM');
      const [code] = (await once(worker, 'exit')) as [number | null];
      assert.equal(code, 0, err);
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  },
);

test('tile --json is accepted and prints the one JSON object tile always prints', async () => {
  const server: DemoTileServer = await startDemoTileServer({ latencyMs: 2 });
  try {
    const sources = path.join(dir, 'sources.yaml');
    writeFileSync(sources, `sources:\n  demo:\n    type: xyz\n    url: ${server.template}\n`);
    const r = await cli(['tile', '7/66/45', '--sources', sources, '--json']);
    assert.equal(r.code, 0, r.err);
    const t = JSON.parse(r.out) as { tile: string; source: string; status: string };
    assert.deepEqual([t.tile, t.source, t.status], ['7/66/45', 'demo', 'ok']);
  } finally {
    await server.close();
  }
});

test(
  'demo --json: one JSON object on stdout (result, breaker transitions, what the tile server saw), progress on stderr',
  { timeout: 300_000 },
  async () => {
    const out = path.join(dir, 'demo');
    const r = await cli(['demo', '--out', out, '--json'], {
      TEMPORAL_ADDRESS: env.address,
      TILEBREAKER_TASK_QUEUE: uniqueTaskQueue('json-demo'),
      TILEBREAKER_OUTPUT_DIR: dir,
    });
    assert.equal(r.code, 0, `${r.out}\n${r.err}`);
    const doc = JSON.parse(r.out) as {
      workflowId: string;
      result: { total: number; counts: { ok: number }; files: string[] };
      breaker: { key: string; transitions: { from: string; to: string }[] };
      tileServer: { requests: number; whileDown: number };
    };
    assert.equal(doc.result.total, 754);
    assert.ok(doc.result.counts.ok > 0);
    assert.ok(doc.result.files.some((f) => f.endsWith('alps-z10.tif')));
    assert.ok(
      doc.breaker.transitions.some((t) => t.to === 'open'),
      JSON.stringify(doc.breaker),
    );
    assert.ok(doc.tileServer.requests >= 754);
    assert.match(r.err, /754 tiles; the demo tile server goes down/);
  },
);
