import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

// `npm start` runs the demo with --metrics-addr 127.0.0.1:9464: with that port taken (a second demo, a
// Prometheus exporter), the demo serves its metrics on a free port and prints where, instead of stopping.
const root = path.join(__dirname, '..', '..');
const main = path.join(root, 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-demo-port-'));
let env: TestWorkflowEnvironment;
const held: Server[] = [];

/** Listens on host:port (0: any) and keeps it until the end; resolves with the port, or null when it is taken already. */
function occupy(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(null) : reject(err)));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      held.push(server);
      resolve((server.address() as { port: number }).port);
    });
  });
}

before(async () => {
  env = await devServerEnv(ALL_SEARCH_ATTRIBUTES);
});
after(async () => {
  for (const s of held) s.close();
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

test(
  "npm start's demo with 127.0.0.1:9464 taken: it serves metrics on a free port, says which, and runs to the end",
  { timeout: 300_000 },
  async () => {
    const script = (
      JSON.parse(readFileSync(path.join(root, '..', 'package.json'), 'utf8')) as { scripts: Record<string, string> }
    ).scripts['start']!;
    const args = /node dist\/src\/cli\/main\.js (.*)$/.exec(script)?.[1]?.split(' ');
    assert.deepEqual(args, ['demo', '--metrics-addr', '127.0.0.1:9464'], script);
    // Taken by this test, or already by something else: taken either way.
    await occupy(9464);
    const child = spawn(process.execPath, [main, ...args, '--out', path.join(dir, 'demo')], {
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: env.address,
        TILEBREAKER_TASK_QUEUE: uniqueTaskQueue('demo-port'),
        TILEBREAKER_OUTPUT_DIR: dir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      const end = Date.now() + 60_000;
      let url: string | undefined;
      while (!(url = /^tilebreaker demo: metrics at (\S+)$/m.exec(err)?.[1])) {
        if (Date.now() > end || child.exitCode !== null)
          throw new Error(`no metrics address printed; stdout: ${out}\nstderr: ${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(
        err,
        /^tilebreaker: --metrics-addr 127\.0\.0\.1:9464 is taken \(something else listens there\); serving metrics at http:\/\/127\.0\.0\.1:\d+\/metrics instead$/m,
      );
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      assert.notEqual(new URL(url).port, '9464');
      // The address printed is the one served.
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /^# (HELP|TYPE) /m);
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0, `${out}\n${err}`);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  },
);

test('a worker whose --metrics-addr is taken stops, naming the address (its scraper is configured for it); as JSON under --json', async () => {
  const port = await occupy(0);
  const run = (extra: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) => {
      execFile(
        process.execPath,
        [main, 'worker', '--metrics-addr', `127.0.0.1:${port}`, ...extra],
        { env: { ...process.env, TEMPORAL_ADDRESS: env.address }, timeout: 60_000 },
        (e, o, s) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out: o, err: s }),
      );
    });
  const text = await run([]);
  assert.equal(text.code, 2, text.out);
  assert.match(
    text.err,
    new RegExp(`^tilebreaker: --metrics-addr 127\\.0\\.0\\.1:${port}: .*(in use|AddrInUse)`, 'mi'),
  );
  const json = await run(['--json']);
  assert.equal(json.code, 2);
  const e = (JSON.parse(json.out) as { error: { message: string; field?: string; exitCode: number } }).error;
  assert.equal(e.field, '--metrics-addr');
  assert.equal(e.exitCode, 2);
  assert.match(e.message, new RegExp(`^--metrics-addr 127\\.0\\.0\\.1:${port}: `));
});
