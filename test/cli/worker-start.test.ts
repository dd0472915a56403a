import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { test } from 'node:test';
import { serverNotReady, untilServerReady } from '../../src/client/server-wait';
import { localBinaries } from '../../src/client/local-server';
import { freePort } from '../helpers/mapserver';

const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

test('waiting for the server: retried with a capped backoff, said once when it starts and once when it ends', async () => {
  const lines: string[] = [];
  let clock = 0;
  let tries = 0;
  const out = await untilServerReady(
    () => {
      if (++tries < 6) return Promise.reject(new Error(tries < 4 ? 'cannot reach the Temporal server at x: Connection refused' : 'Namespace ns is not found.'));
      return Promise.resolve('worker');
    },
    {
      say: (l) => lines.push(l),
      what: 'the Temporal server at x',
      initialDelayMs: 1,
      maxDelayMs: 4,
      now: () => (clock += 1_000),
    },
  );
  assert.equal(out, 'worker');
  assert.equal(tries, 6);
  assert.equal(lines.length, 2, lines.join('\n'));
  assert.match(lines[0]!, /^tilebreaker worker: waiting for the Temporal server at x, retrying with backoff up to 0.004 s: cannot reach/);
  assert.match(lines[1]!, /answered after .* s \(6 attempts\)$/);
  // A refusal that waiting does not cure is thrown at once.
  await assert.rejects(
    untilServerReady(() => Promise.reject(new Error('PERMISSION_DENIED: bad API key')), { say: (l) => lines.push(l), what: 'x' }),
    /PERMISSION_DENIED/,
  );
  assert.equal(lines.length, 2);
  assert.ok(serverNotReady(new Error('13 INTERNAL: ConnectError("tcp connect error")')));
});

test('a worker started before its Temporal server waits for it, then runs (one line, no warning per attempt)', { timeout: 120_000 }, async (t) => {
  const bins = localBinaries();
  if (!bins.cli) return t.skip('no Temporal CLI (scripts/setup-temporal.sh)');
  const port = await freePort();
  const namespace = `late-${process.pid}`;
  const worker = spawn(process.execPath, [cli, 'worker'], {
    env: { ...process.env, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, TEMPORAL_NAMESPACE: namespace, TILEBREAKER_LOG_LEVEL: 'WARN' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  worker.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  let server: ChildProcess | undefined;
  try {
    await until(
      () => stderr.includes('waiting for the Temporal server'),
      30_000,
      () => stderr,
    );
    // Still waiting a moment later, and it has not exited.
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal(worker.exitCode, null, stderr);
    server = spawn(bins.cli, ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--namespace', namespace, '--log-level', 'error'], { stdio: 'ignore' });
    await until(
      () => /task queue tilebreaker/.test(stderr),
      90_000,
      () => stderr,
    );
    assert.equal(stderr.match(/waiting for the Temporal server/g)?.length, 1, stderr);
    assert.match(stderr, new RegExp(`the Temporal server at 127\\.0\\.0\\.1:${port} \\(namespace ${namespace}\\) answered after [\\d.]+ s \\(\\d+ attempts\\)`));
    assert.doesNotMatch(stderr, /WARN/, stderr);
    worker.kill('SIGTERM');
    const [code] = (await once(worker, 'exit')) as [number | null];
    assert.equal(code, 0, stderr);
  } finally {
    if (worker.exitCode === null) worker.kill('SIGKILL');
    server?.kill('SIGTERM');
    if (server && server.exitCode === null) await once(server, 'exit');
  }
});

async function until(pred: () => boolean, ms: number, what: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out; so far:\n${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
