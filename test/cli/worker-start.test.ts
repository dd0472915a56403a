import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { serverNotReady, untilServerReady } from '../../src/client/server-wait';
import { LineLogger, logSettings } from '../../src/cli/logging';
import { localBinaries, packageRoot } from '../../src/client/local-server';
import { startEntity } from '../helpers/entity';
import { freePort } from '../helpers/mapserver';

const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

test('waiting for the server: retried with a capped backoff, said once when it starts and once when it ends', async () => {
  const lines: string[] = [];
  let clock = 0;
  let tries = 0;
  const out = await untilServerReady(
    () => {
      if (++tries < 6)
        return Promise.reject(
          new Error(
            tries < 4 ? 'cannot reach the Temporal server at x: Connection refused' : 'Namespace ns is not found.',
          ),
        );
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
  assert.match(
    lines[0]!,
    /^tilebreaker worker: waiting for the Temporal server at x, retrying with backoff up to 0.004 s: cannot reach/,
  );
  assert.match(lines[1]!, /answered after .* s \(6 attempts\)$/);
  // A refusal that waiting does not cure is thrown at once.
  await assert.rejects(
    untilServerReady(() => Promise.reject(new Error('PERMISSION_DENIED: bad API key')), {
      say: (l) => lines.push(l),
      what: 'x',
    }),
    /PERMISSION_DENIED/,
  );
  assert.equal(lines.length, 2);
  assert.ok(serverNotReady(new Error('13 INTERNAL: ConnectError("tcp connect error")')));
});

test(
  'a worker started before its Temporal server waits for it, then runs (one line, no warning per attempt)',
  { timeout: 120_000 },
  async (t) => {
    const bins = localBinaries();
    if (!bins.cli) return t.skip('no Temporal CLI (scripts/setup-temporal.sh)');
    const port = await freePort();
    const namespace = `late-${process.pid}`;
    const worker = spawn(process.execPath, [cli, 'worker'], {
      // The worker's default log level: no TILEBREAKER_LOG_LEVEL.
      env: {
        ...withoutLogLevel(process.env),
        TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
        TEMPORAL_NAMESPACE: namespace,
        TILEBREAKER_TASK_QUEUE: 'tilebreaker',
      },
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
      server = spawn(
        bins.cli,
        [
          'server',
          'start-dev',
          '--headless',
          '--ip',
          '127.0.0.1',
          '--port',
          String(port),
          '--namespace',
          namespace,
          '--log-level',
          'error',
        ],
        { stdio: 'ignore' },
      );
      await until(
        () => /task queue tilebreaker/.test(stderr),
        90_000,
        () => stderr,
      );
      assert.equal(stderr.match(/waiting for the Temporal server/g)?.length, 1, stderr);
      assert.match(
        stderr,
        new RegExp(
          `the Temporal server at 127\\.0\\.0\\.1:${port} \\(namespace ${namespace}\\) answered after [\\d.]+ s \\(\\d+ attempts\\)`,
        ),
      );
      assert.doesNotMatch(stderr, /WARN/, stderr);
      // At its default level the worker logs each breaker transition as one JSON line (the SDK's INFO chatter not).
      const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
      try {
        const client = new Client({ connection, namespace });
        const key = `http://logged-${process.pid}.example.test:80`;
        await startEntity(client, 'tilebreaker', { key }, { reporter: 'w1', counts: { transient: 25 } });
        await until(
          () => stderr.includes('"msg":"breaker transition"'),
          30_000,
          () => stderr,
        );
      } finally {
        await connection.close();
      }
      const entries = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const opened = entries.find((e) => e['msg'] === 'breaker transition');
      assert.ok(opened, stderr);
      assert.equal(opened['level'], 'INFO');
      assert.equal(opened['to'], 'open');
      assert.equal(opened['reason'], 'failure-ratio');
      assert.ok(typeof opened['time'] === 'string' && typeof opened['workflowId'] === 'string', JSON.stringify(opened));
      assert.ok(!entries.some((e) => e['sdkComponent'] === 'worker'), 'no SDK worker chatter at the default level');
      worker.kill('SIGTERM');
      const [code] = (await once(worker, 'exit')) as [number | null];
      assert.equal(code, 0, stderr);
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
      server?.kill('SIGTERM');
      if (server && server.exitCode === null) await once(server, 'exit');
    }
  },
);

function withoutLogLevel(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { TILEBREAKER_LOG_LEVEL: _unset, ...rest } = env;
  return rest;
}

async function until(pred: () => boolean, ms: number, what: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out; so far:\n${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('log lines: JSON by default with time, level, msg and the fields; SDK chatter held to WARN unless the level is set', () => {
  const lines: string[] = [];
  const logger = new LineLogger(
    logSettings({}, 'INFO'),
    (l) => lines.push(l),
    () => new Date(Date.UTC(2001, 0, 2, 3, 4, 5)),
  );
  logger.info('breaker transition', {
    key: 'http://a:80',
    from: 'closed',
    to: 'open',
    sdkComponent: 'workflow',
    n: 1n,
  });
  logger.info('Worker state changed', { sdkComponent: 'worker' });
  logger.warn('tilebreaker guard: breaker entity unreachable; failing open', {
    key: 'http://a:80',
    error: new Error('deadline'),
  });
  logger.debug('detail');
  assert.deepEqual(
    lines.map((l) => JSON.parse(l) as unknown),
    [
      {
        time: '2001-01-02T03:04:05.000Z',
        level: 'INFO',
        msg: 'breaker transition',
        key: 'http://a:80',
        from: 'closed',
        to: 'open',
        sdkComponent: 'workflow',
        n: '1',
      },
      {
        time: '2001-01-02T03:04:05.000Z',
        level: 'WARN',
        msg: 'tilebreaker guard: breaker entity unreachable; failing open',
        key: 'http://a:80',
        error: 'deadline',
      },
    ],
  );
  // An explicit level applies to the SDK's entries too; text on request.
  const text: string[] = [];
  new LineLogger(logSettings({ TILEBREAKER_LOG_LEVEL: 'info', TILEBREAKER_LOG_FORMAT: 'text' }, 'WARN'), (l) =>
    text.push(l),
  ).info('Worker state changed', { sdkComponent: 'worker' });
  assert.match(text[0]!, /^\S+ \[INFO\] Worker state changed \{"sdkComponent":"worker"\}$/);
  // The fetch worker polls for activities only: the SDK's warning about it is detail, not a warning.
  const quiet: string[] = [];
  const q = new LineLogger(logSettings({}, 'INFO'), (l) => quiet.push(l));
  q.warn('No workflows registered, not polling for workflow tasks', {
    sdkComponent: 'worker',
    taskQueue: 'tilebreaker-fetch',
  });
  assert.deepEqual(quiet, []);
  q.warn('No workflows registered, not polling for workflow tasks', {
    sdkComponent: 'worker',
    taskQueue: 'tilebreaker',
  });
  assert.equal(quiet.length, 1, 'on any other queue it stays a warning');
  assert.throws(
    () => logSettings({ TILEBREAKER_LOG_LEVEL: 'loud' }, 'INFO'),
    /TILEBREAKER_LOG_LEVEL must be one of TRACE, DEBUG, INFO, WARN, ERROR \(got "loud"\)/,
  );
  assert.throws(
    () => logSettings({ TILEBREAKER_LOG_FORMAT: 'xml' }, 'INFO'),
    /TILEBREAKER_LOG_FORMAT must be one of json, text \(got "xml"\)/,
  );
});

test('--version prints the package version; a bad drill file exits 2 naming the file and the field, before any server starts', async () => {
  const run = (args: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, [cli, ...args], {
        env: { ...withoutLogLevel(process.env), TEMPORAL_ADDRESS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('exit', (code) => resolve({ code: code ?? -1, out, err }));
    });
  const { version } = JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  const v = await run(['--version']);
  assert.equal(v.code, 0);
  assert.equal(v.out.trim(), version);
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-drill-'));
  try {
    const bad = path.join(dir, 'drill.json');
    writeFileSync(bad, JSON.stringify({ config: { minSamples: -1 }, steps: [] }));
    const d = await run(['drill', bad]);
    assert.equal(d.code, 2, d.err);
    assert.match(
      d.err,
      new RegExp(`^tilebreaker: drill file ${bad.replace(/[.]/g, '\\.')}: breaker config: minSamples: .*\\(got -1\\)`),
    );
    assert.doesNotMatch(d.err, /starting a local Temporal dev server|\n\s+at /, 'no server started, no stack trace');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a bad fetch-batch cap (flag or TILEBREAKER_FETCH_BATCHES) exits 2 naming the flag or variable and the value, before connecting', async () => {
  const run = (args: string[], extra: Record<string, string>) =>
    new Promise<{ code: number; err: string }>((resolve) => {
      // An address nothing listens on: the check must come before any attempt to reach it.
      const child = spawn(process.execPath, [cli, 'worker', ...args], {
        env: { ...withoutLogLevel(process.env), TEMPORAL_ADDRESS: '127.0.0.1:1', ...extra },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('exit', (code) => resolve({ code: code ?? -1, err }));
    });
  for (const bad of ['0', '-1', '2.5', 'two', '1001']) {
    const f = await run(['--fetch-batches', bad], {});
    assert.equal(f.code, 2, f.err);
    assert.match(
      f.err,
      new RegExp(
        `worker: --fetch-batches must be a whole number from 1 to 1000 \\(got "${bad.replace(/[.]/g, '\\.')}"\\)`,
      ),
    );
    assert.doesNotMatch(f.err, /waiting for the Temporal server|\n\s+at /, 'no wait for the server, no stack trace');
  }
  const e = await run([], { TILEBREAKER_FETCH_BATCHES: 'lots' });
  assert.equal(e.code, 2, e.err);
  assert.match(e.err, /worker: TILEBREAKER_FETCH_BATCHES must be a whole number from 1 to 1000 \(got "lots"\)/);
});
