import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const FLEET_DEMO = path.join(__dirname, '..', '..', 'scripts', 'fleet-demo.js');

/** Every process's parent, from /proc: pid -> ppid, for the processes not ended (a zombie has ended). */
function liveParents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid ...: the command name may hold spaces and parentheses.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state !== 'Z' && state !== 'X') out.set(Number(name), Number(ppid));
    } catch {
      // ended while read
    }
  }
  return out;
}

function descendants(root: number): number[] {
  const parents = liveParents();
  const found: number[] = [];
  const seen = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parents) {
      if (seen.has(ppid) && !seen.has(pid)) {
        seen.add(pid);
        found.push(pid);
        grew = true;
      }
    }
  }
  return found;
}

async function within(ms: number, what: () => string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not within ${ms / 1000} s: ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const root = path.join(__dirname, '..', '..', '..');
const missing =
  existsSync(path.join(root, '.s3', 'bin', 'versitygw')) &&
  existsSync(path.join(root, '.temporal', 'venv', 'bin', 'temporal'))
    ? false
    : 'needs the S3 test server and the Temporal CLI (bash scripts/setup-s3.sh, bash scripts/setup-temporal.sh)';

test(
  'the fleet demo stopped with SIGTERM once its workers are up ends every process it started (workers, Temporal and S3 servers) and exits 143',
  { skip: missing, timeout: 240_000 },
  async () => {
    const demo = spawn(process.execPath, [FLEET_DEMO, '--soak', '5', '--side', '2', '--latency', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    demo.stdout.on('data', (d: Buffer) => (out += d.toString()));
    demo.stderr.resume();
    const exited = new Promise<number | null>((resolve) => demo.once('exit', (code) => resolve(code)));
    try {
      await within(
        180_000,
        () => 'the demo says its 3 workers are up',
        () => / 3 workers, /.test(out) || demo.exitCode !== null,
      );
      assert.equal(demo.exitCode, null, `the demo ended early: ${out}`);
      // Its workers, the Temporal server, the S3 server (the soak may start another worker meanwhile: every one seen counts).
      const started = new Set(descendants(demo.pid!));
      assert.ok(started.size >= 5, `children of the demo: ${[...started].join(', ')}`);
      demo.kill('SIGTERM');
      const watch = setInterval(() => descendants(demo.pid!).forEach((p) => started.add(p)), 100);
      // Its orderly stop takes at most 30 s, then what is left is killed.
      await within(
        60_000,
        () => 'the demo exits',
        () => demo.exitCode !== null || demo.signalCode !== null,
      );
      clearInterval(watch);
      assert.equal(await exited, 143, out);
      const left = () => [...started].filter((p) => liveParents().has(p));
      await within(
        10_000,
        () => `the demo's processes end (${left().join(', ')} left)`,
        () => left().length === 0,
      );
    } finally {
      if (demo.exitCode === null) demo.kill('SIGKILL');
    }
  },
);
