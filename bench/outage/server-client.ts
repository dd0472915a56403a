import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { adopt } from '../../src/demo/children';
import type { OutagePlan } from './server';
import type { Schedule, ServerStats } from './types';

/** A handle on an outage tile server running in its own process (server-child.ts). */
export class OutageServerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  static async spawn(tileLatencyMs: number): Promise<OutageServerProcess> {
    const child = adopt(
      fork(path.join(__dirname, 'server-child.js'), [], {
        env: { ...process.env, OUTAGE_TILE_LATENCY_MS: String(tileLatencyMs) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      }),
    );
    const ready = await waitFor<{ type: 'ready'; port: number }>(child, 'ready', 30_000);
    return new OutageServerProcess(child, ready.port);
  }

  /** The start signal; resolves with the planned schedule as the server set it. */
  async start(plan: OutagePlan): Promise<Schedule> {
    const started = waitFor<{ schedule: Schedule }>(this.child, 'started', 10_000);
    this.child.send({ type: 'start', plan });
    return (await started).schedule;
  }

  async stats(): Promise<ServerStats> {
    const stats = waitFor<{ stats: ServerStats }>(this.child, 'stats', 30_000);
    this.child.send({ type: 'stats' });
    return (await stats).stats;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

function waitFor<T>(child: ChildProcess, type: string, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => done(new Error(`outage server: no '${type}' message within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onMessage = (msg: { type: string; message?: string }) => {
      if (msg.type === type) done(null, msg as T);
      else if (msg.type === 'error') done(new Error(`outage server: ${msg.message}`));
    };
    const onExit = (code: number | null) =>
      done(new Error(`outage server: exited (code ${code}) while waiting for '${type}'`));
    function done(err: Error | null, value?: T) {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(value as T);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
