import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  /** Its Temporal identity (and breaker reporter id) starts with this: `worker-<pid>@`. */
  identityPrefix: string;
  /** Resolves once the worker has connected and is about to poll. */
  ready: Promise<void>;
  exited: Promise<void>;
}

/**
 * `tilebreaker worker` in its own process (so it can be SIGKILLed), on `address` and `taskQueue`; `extraEnv` on
 * top. `opts.cli`: another build's CLI (the previous release's, for the upgrade test); `opts.args`: flags.
 */
export function startWorkerProcess(
  address: string,
  namespace: string,
  taskQueue: string,
  extraEnv: Record<string, string> = {},
  opts: { cli?: string; args?: string[] } = {},
): WorkerProcess {
  const cli = opts.cli ?? path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
  const child = spawn(process.execPath, [cli, 'worker', ...(opts.args ?? [])], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: namespace,
      TILEBREAKER_TASK_QUEUE: taskQueue,
      TILEBREAKER_OUTPUT_DIR: tmpdir(),
      TILEBREAKER_LOG_LEVEL: 'WARN',
      ...extraEnv,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-4_000);
      if (err.includes('tilebreaker worker:')) resolve();
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`worker exited (${code ?? signal}) before it was ready: ${err}`)),
    );
  });
  child.on('exit', (code, signal) => {
    if (code && code !== 0) console.error(`worker exited ${code} ${signal ?? ''}: ${err}`);
  });
  return { child, pid: child.pid!, identityPrefix: `worker-${child.pid}@`, ready, exited };
}
