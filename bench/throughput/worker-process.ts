/**
 * `tilebreaker worker` child processes for the benches that measure whole worker processes (bench:throughput
 * --workers, and the metrics-overhead comparison): start one, stop it, read its CPU time (Linux /proc).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { adopt } from '../../src/demo/children';

const CLI = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

/** `tilebreaker worker [args]` in its own process; resolves once it has connected and is about to poll. */
export async function workerProcess(env: Record<string, string>, args: string[] = []): Promise<ChildProcess> {
  const child = adopt(
    spawn(process.execPath, [CLI, 'worker', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    }),
  );
  let err = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-4_000);
      if (err.includes('tilebreaker worker:')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited (${code}) before it was ready: ${err}`)));
  });
  return child;
}

export async function stopWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, delay(15_000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** A process's parent, name and CPU time so far (user + system, every thread), or null when it is gone. */
export function procStat(pid: number): { ppid: number; name: string; seconds: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(rest[1]),
      name: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')),
      seconds: (Number(rest[11]) + Number(rest[12])) / TICKS,
    };
  } catch {
    return null;
  }
}
