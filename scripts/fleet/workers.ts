/**
 * `tilebreaker worker` processes, each in a working folder of its own (its output root and scratch folder),
 * sharing nothing but the Temporal server and the bucket.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { adopt } from '../../src/demo/children';

const CLI = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

export interface FleetWorker {
  name: string;
  pid: number;
  child: ChildProcess;
}

export class WorkerFleet {
  private count = 0;
  readonly live: FleetWorker[] = [];
  /** Every worker ever started, by the pid its Temporal identity names. */
  readonly byPid = new Map<number, string>();

  constructor(
    private readonly base: string,
    private readonly env: Record<string, string>,
  ) {}

  async start(): Promise<FleetWorker> {
    const name = `w${++this.count}`;
    const dir = path.join(this.base, name);
    mkdirSync(path.join(dir, 'scratch'), { recursive: true });
    const child = adopt(
      spawn(process.execPath, [CLI, 'worker', '--fetch-batches', '2'], {
        cwd: dir,
        env: {
          ...process.env,
          ...this.env,
          TILEBREAKER_OUTPUT_DIR: dir,
          TILEBREAKER_SOURCES_DIR: dir,
          TILEBREAKER_SCRATCH_DIR: path.join(dir, 'scratch'),
          TILEBREAKER_LOG_LEVEL: 'ERROR',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    let err = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        err = (err + d.toString()).slice(-4_000);
        if (err.includes('tilebreaker worker:')) {
          child.stderr.off('data', onData);
          child.stderr.resume();
          resolve();
        }
      };
      child.stderr.on('data', onData);
      child.once('exit', (code) =>
        reject(new Error(`fleet: worker ${name} exited (${code}) before it was ready: ${err}`)),
      );
    });
    const w = { name, pid: child.pid!, child };
    this.live.push(w);
    this.byPid.set(w.pid, name);
    return w;
  }

  /** SIGKILL: no drain, no goodbye, as a node that loses power. */
  async kill(w: FleetWorker): Promise<void> {
    this.live.splice(this.live.indexOf(w), 1);
    if (w.child.exitCode !== null || w.child.signalCode !== null) return;
    const exited = new Promise((r) => w.child.once('exit', r));
    w.child.kill('SIGKILL');
    await exited;
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.live.splice(0).map(async (w) => {
        if (w.child.exitCode !== null || w.child.signalCode !== null) return;
        const exited = new Promise((r) => w.child.once('exit', r));
        w.child.kill('SIGTERM');
        const timer = setTimeout(() => w.child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** The worker a Temporal identity (`worker-<pid>@<host>-<random>`) names. */
  nameOf(identity: string): string {
    const pid = Number(/^worker-(\d+)@/.exec(identity)?.[1]);
    return this.byPid.get(pid) ?? identity;
  }
}
