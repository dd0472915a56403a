/** Spawning and timing the external seeders, finding them on PATH, and reading back the tiles they wrote. */
import { spawn } from 'node:child_process';
import { accessSync, constants, createWriteStream, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { adopt } from '../../src/demo/children';
import type { TileSet } from './tileset';
import { tileKey } from './tileset';

/** The executable's path on PATH (or /usr/bin, /usr/sbin), or null. */
export function which(cmd: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/bin', '/usr/sbin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

export interface Timed {
  seconds: number;
  /** CPU seconds (user + system) of the tool and all its processes/threads (bash's `times` for its children). */
  cpu: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines of stderr+stdout (the full logs are in `log`). */
  tail: string;
  log: string;
}

/**
 * Runs `cmd args` in `cwd` with stdout+stderr to `<cwd>/<name>.log`, timing spawn to exit (wall clock); a bash
 * wrapper reports the CPU time of the tool and everything it waited for (`times`).
 */
export async function spawnTimed(name: string, cmd: string, args: string[], cwd: string): Promise<Timed> {
  const log = path.join(cwd, `${name}.log`);
  const out = createWriteStream(log);
  await new Promise((r) => out.once('open', r));
  const started = performance.now();
  const cpuFile = path.join(cwd, `${name}.cpu`);
  // A process group of its own: the bench's end kills the tool too, not only its bash.
  const child = adopt(
    spawn('bash', ['-c', '"$@"; rc=$?; times > "$SEEDERS_CPU_FILE"; exit $rc', 'bash', cmd, ...args], {
      cwd,
      stdio: ['ignore', out, out],
      env: { ...process.env, SEEDERS_CPU_FILE: cpuFile },
      detached: true,
    }),
    { group: true },
  );
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (c, s) => resolve([c, s]));
  });
  const seconds = (performance.now() - started) / 1000;
  await new Promise((r) => out.end(r));
  const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
  const tail = text
    .split(/[\r\n]+/)
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-6)
    .join('\n');
  // `times`: line 1 the shell's own user/sys, line 2 its children's, as "1m2.345s 0m0.678s".
  const secs = (t: string) => {
    const m = /(\d+)m([\d.]+)s/.exec(t);
    return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
  };
  const lines = existsSync(cpuFile) ? readFileSync(cpuFile, 'utf8').trim().split('\n') : [];
  const cpu = lines[1] ? lines[1].split(/\s+/).reduce((a, t) => a + secs(t), 0) : NaN;
  return { seconds, cpu, code, signal, tail, log };
}

export interface OnDisk {
  /** Every <z>/<x>/<y>.png under the root. */
  total: number;
  /** The tile set's tiles found: key "x/y" -> file. */
  inSet: Map<string, string>;
  /** Files outside the tile set (other zooms, rows or columns), a few examples. */
  extra: number;
  extraExamples: string[];
}

/** Finds every `.../<z>/<x>/<y>.png` under root (the layouts of all three tools end like that). */
export function scanTiles(root: string, ts: TileSet): OnDisk {
  const r: OnDisk = { total: 0, inSet: new Map(), extra: 0, extraExamples: [] };
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile() || e.isSymbolicLink()) {
        const m = /(?:^|\/)(\d+)\/(\d+)\/(\d+)\.png$/.exec(full);
        if (!m) continue;
        r.total++;
        const [z, x, y] = [Number(m[1]), Number(m[2]), Number(m[3])];
        if (z === ts.z && x >= ts.xMin && x <= ts.xMax && y >= ts.yMin && y <= ts.yMax)
          r.inSet.set(tileKey(x, y), full);
        else {
          r.extra++;
          if (r.extraExamples.length < 4) r.extraExamples.push(`${z}/${x}/${y}`);
        }
      }
    }
  };
  walk(root);
  return r;
}

/**
 * CPU seconds (user + system) of a live process from /proc/<pid>/stat, its own and, with `children`, that of
 * its children it has waited for (lighttpd reaps every mapserv, so that is MapServer's CPU).
 */
export function procCpuSeconds(pid: number, children: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // Fields after the comm: state is f[0], so utime (14) is f[11], stime f[12], cutime f[13], cstime f[14].
    const ticks = f[11]! + f[12]! + (children ? f[13]! + f[14]! : 0);
    return ticks / CLK_TCK;
  } catch {
    return NaN;
  }
}
const CLK_TCK = 100;

/** CPU seconds the whole machine has been busy (all cores, /proc/stat: everything but idle and iowait). */
export function machineBusySeconds(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // user nice system idle iowait irq softirq steal
    return (total - f[3]! - f[4]!) / CLK_TCK;
  } catch {
    return NaN;
  }
}
