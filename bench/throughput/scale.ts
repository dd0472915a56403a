/**
 * bench:throughput --workers N: one mosaic built by one worker process, then the same mosaic by N worker
 * processes (each `tilebreaker worker`, its own Temporal worker on the same task queue of the same dev server),
 * from a latency-bound tile server in its own process. Which worker ran each fetch batch is read from the
 * histories (an ACTIVITY_TASK_STARTED event names the worker's identity, unique per process). Prints the fetch
 * phases, the batches per worker and the CPU each process used, then one line:
 *   scale: workers=<N> speedup=<float> busiest-share=<float>
 * The one worker runs twice, with no cap on its fetch batches and with the cap the fleet runs with; the
 * speedup is against the faster of the two, so the cap cannot buy the fleet's figure with a slower baseline.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { startEmbeddedServer } from '../../src/client/embedded-server';
import { startMosaic } from '../../src/client/mosaics';
import { tileBounds } from '../../src/geo/mercator';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { eventMs, fetchPhase, histories, type HistoryEvent } from './history';
import { startServer } from './server';
import { procStat, stopWorker, workerProcess } from './worker-process';

export interface ScaleOpts {
  workers: number;
  side: number;
  /** The source's concurrency: requests in flight per worker process (and origin). */
  concurrency: number;
  /** Batches in flight (the mosaic's parallelBatches). */
  batches: number;
  batchSize: number;
  latency: number;
  /** Each worker's cap on fetch batches at once (TILEBREAKER_FETCH_BATCHES); undefined: the worker's default. */
  fetchBatches?: number;
}

/** "No cap" for the 1-worker comparison run: more than any mosaic here has in flight. */
const NO_CAP = 1000;

interface ProcCpu {
  pid: number;
  name: string;
  seconds: number;
}

/** CPU time so far of this process and every process under it (Linux /proc; empty elsewhere). */
function treeCpu(): Map<number, ProcCpu> {
  const out = new Map<number, ProcCpu>();
  let pids: number[];
  try {
    pids = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number);
  } catch {
    return out;
  }
  const stats = new Map(pids.map((p) => [p, procStat(p)] as const));
  const inTree = (p: number): boolean => {
    for (let q = p, hops = 0; q > 1 && hops < 10; hops++) {
      if (q === process.pid) return true;
      q = stats.get(q)?.ppid ?? 0;
    }
    return false;
  };
  for (const [pid, st] of stats) if (st && inTree(pid)) out.set(pid, { pid, name: st.name, seconds: st.seconds });
  return out;
}

/** The machine's CPU ticks so far, busy and in all (from /proc/stat). */
function machineTicks(): { busy: number; total: number } {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - f[3]! - (f[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

interface Sample {
  at: number;
  procs: Map<number, ProcCpu>;
  machine: { busy: number; total: number };
}

/** CPU used per process (and the machine's busy share) between the samples that bracket [from, to]. */
function cpuOver(samples: Sample[], from: number, to: number, names: Map<number, string>): string[] {
  const a = [...samples].reverse().find((s) => s.at <= from) ?? samples[0]!;
  const b = samples.find((s) => s.at >= to) ?? samples[samples.length - 1]!;
  const wall = (b.at - a.at) / 1000;
  const lines = [...b.procs.values()]
    .map((p) => ({ ...p, used: p.seconds - (a.procs.get(p.pid)?.seconds ?? 0) }))
    .filter((p) => p.used >= 0.05)
    .sort((x, y) => y.used - x.used)
    .map(
      (p) => `${names.get(p.pid) ?? p.name} ${p.used.toFixed(1)} s (${((p.used / wall) * 100).toFixed(0)} % of a core)`,
    );
  const busy =
    b.machine.total > a.machine.total ? (b.machine.busy - a.machine.busy) / (b.machine.total - a.machine.total) : NaN;
  lines.push(
    `machine (every process, other sessions' too): ${(busy * 100).toFixed(0)} % of ${availableParallelism()} cores busy`,
  );
  return [`over ${wall.toFixed(1)} s`, ...lines];
}

interface RunResult {
  workers: number;
  label: string;
  fetchS: number;
  ok: number;
  /** Fetch batches by the identity of the worker that ran them. */
  batches: Map<string, WorkerBatches>;
  /** The fetch phase, on the history's clock. */
  phase: [number, number];
  workflowTasks: Map<string, number>;
  cpuLines: string[];
}

/** Workflow tasks per worker identity (the worker that holds the mosaic's workflow, and any other that took a task). */
function workflowTasksByWorker(events: HistoryEvent[][]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of events.flat()) {
    const who = e.workflowTaskStartedEventAttributes?.identity;
    if (who) counts.set(who, (counts.get(who) ?? 0) + 1);
  }
  return counts;
}

interface WorkerBatches {
  count: number;
  /** When each of its batches started and completed. */
  spans: [number, number][];
}

/** Fetch batches per worker identity, from the ACTIVITY_TASK_STARTED events (their scheduled event names the type). */
function batchesByWorker(events: HistoryEvent[][]): Map<string, WorkerBatches> {
  const out = new Map<string, WorkerBatches>();
  for (const h of events) {
    const types = new Map<string, string>();
    const started = new Map<string, { who: string; at: number }>();
    for (const e of h) {
      const s = e.activityTaskScheduledEventAttributes;
      if (s) types.set(String(e.eventId), s.activityType?.name ?? '');
      const st = e.activityTaskStartedEventAttributes;
      if (st && types.get(String(st.scheduledEventId)) === 'fetchMosaicBatch') {
        const who = st.identity ?? '?';
        const w = out.get(who) ?? { count: 0, spans: [] };
        w.count++;
        out.set(who, w);
        started.set(String(st.scheduledEventId), { who, at: eventMs(e) });
      }
      const done =
        e.activityTaskCompletedEventAttributes ??
        e.activityTaskFailedEventAttributes ??
        e.activityTaskTimedOutEventAttributes;
      const from = done ? started.get(String(done.scheduledEventId)) : undefined;
      if (from) out.get(from.who)!.spans.push([from.at, eventMs(e)]);
    }
  }
  return out;
}

/** How much of [from, to] is covered by at least one span. */
function covered(spans: [number, number][], from: number, to: number): number {
  let sum = 0;
  let end = from;
  for (const [a, b] of [...spans].sort((x, y) => x[0] - y[0])) {
    const lo = Math.max(a, end);
    const hi = Math.min(b, to);
    if (hi > lo) sum += hi - lo;
    end = Math.max(end, b);
  }
  return sum;
}

export async function runScale(o: ScaleOpts): Promise<void> {
  const z = 12;
  const [x0, y0] = [2100, 1400];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + o.side - 1, y0 + o.side - 1);
  const total = o.side * o.side;
  const server = await startServer(o.latency);
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-scale-'));
  const request = (name: string): MosaicRequest => ({
    source: { type: 'xyz', url: `${server.url}/{z}/{x}/{y}.png`, concurrency: o.concurrency },
    sourceName: 'bench',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: z,
    output: path.join(work, name, 'mosaic.tif'),
    batchSize: o.batchSize,
    parallelBatches: o.batches,
    maxTiles: total,
  });
  console.log(
    `bench:throughput --workers ${o.workers}: ${o.side} x ${o.side} = ${total} tiles, batches of ${o.batchSize}, ${o.batches} batches in flight, ` +
      `source concurrency ${o.concurrency} per worker process, server latency ${o.latency} ms (1 worker: at most ${((o.concurrency * 1000) / o.latency).toFixed(0)} tiles/s); ` +
      `${availableParallelism()} cores, load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );

  const temporal = await startEmbeddedServer({ dbFile: path.join(work, 'temporal.sqlite') });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: temporal.namespace });
  // One task queue for both runs: the breaker entity the first run starts lives on it, and the second run's
  // workers must serve it.
  const taskQueue = 'bench-scale';
  const env = {
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_NAMESPACE: temporal.namespace,
    TILEBREAKER_TASK_QUEUE: taskQueue,
    TILEBREAKER_OUTPUT_DIR: work,
    TILEBREAKER_SOURCES_DIR: work,
    TILEBREAKER_LOG_LEVEL: 'WARN',
  };

  const capped = o.fetchBatches === undefined ? {} : { TILEBREAKER_FETCH_BATCHES: String(o.fetchBatches) };
  const run = async (n: number, label: string, capEnv: Record<string, string>): Promise<RunResult> => {
    const children = await Promise.all(Array.from({ length: n }, () => workerProcess({ ...env, ...capEnv })));
    const names = new Map<number, string>([
      [process.pid, 'bench'],
      [server.pid, 'tile server'],
      ...children.map((c) => [c.pid!, `worker-${c.pid}`] as const),
    ]);
    // CPU per process and the machine's, sampled through the run: the fetch phase's share is read off afterwards.
    const samples: Sample[] = [];
    const sample = () => samples.push({ at: Date.now(), procs: treeCpu(), machine: machineTicks() });
    const sampler = setInterval(sample, 500);
    try {
      // Every worker polling before the mosaic starts.
      await delay(1_000);
      sample();
      const id = `bench-scale-${n}-${label}-${Date.now()}`;
      const handle = await startMosaic(client, taskQueue, request(`workers-${n}-${label}`), id);
      const result = await handle.result();
      sample();
      const events = await histories(client, id);
      const main = events[0]!;
      const [from, to] = fetchPhase(main);
      return {
        workers: n,
        label,
        fetchS: (to - from) / 1000,
        ok: result.counts.ok,
        batches: batchesByWorker(events),
        phase: [from, to],
        workflowTasks: workflowTasksByWorker(events),
        cpuLines: cpuOver(samples, from, to, names),
      };
    } finally {
      clearInterval(sampler);
      await Promise.all(children.map(stopWorker));
    }
  };

  const report = (r: RunResult) => {
    const all = [...r.batches.values()].reduce((a, b) => a + b.count, 0);
    console.log(
      `  ${r.workers} worker(s), ${r.label}: fetch ${r.fetchS.toFixed(1)} s (${(total / r.fetchS).toFixed(1)} tiles/s); ok ${r.ok}/${total}`,
    );
    const byCount = [...r.batches.entries()].sort((a, b) => b[1].count - a[1].count);
    const busy = (w: WorkerBatches) => Math.round((covered(w.spans, ...r.phase) / (r.phase[1] - r.phase[0])) * 100);
    console.log(
      `    fetch batches per worker (${all}): ${byCount.map(([who, w]) => `${who} ${w.count} (running a batch ${busy(w)} % of the phase)`).join(', ')}`,
    );
    console.log(
      `    the mosaic's workflow tasks: ${[...r.workflowTasks.entries()].map(([who, k]) => `${who} ${k}`).join(', ')}`,
    );
    console.log(`    cpu in the fetch phase ${r.cpuLines[0]}: ${r.cpuLines.slice(1).join('; ')}`);
  };
  const cap = `fetch-batches ${o.fetchBatches ?? 'default'}`;
  let uncapped: RunResult;
  let one: RunResult;
  let many: RunResult;
  try {
    uncapped = await run(1, `fetch-batches ${NO_CAP} (no cap)`, { TILEBREAKER_FETCH_BATCHES: String(NO_CAP) });
    report(uncapped);
    one = await run(1, cap, capped);
    report(one);
    many = await run(o.workers, cap, capped);
    report(many);
  } finally {
    await connection.close();
    await temporal.stop();
    server.stop();
    rmSync(work, { recursive: true, force: true });
  }
  const counts = [...many.batches.values()].map((w) => w.count);
  const busiest = counts.length ? Math.max(...counts) / counts.reduce((a, b) => a + b, 0) : 1;
  const baseline = Math.min(one.fetchS, uncapped.fetchS);
  console.log(
    `1 worker: fetch ${uncapped.fetchS.toFixed(1)} s with no cap, ${one.fetchS.toFixed(1)} s with ${cap}; speedup against the faster`,
  );
  const speedup = baseline / many.fetchS;
  console.log(
    `targets: speedup >= 2.5: ${speedup >= 2.5 ? 'met' : 'MISSED'}; busiest-share <= 0.5: ${busiest <= 0.5 ? 'met' : 'MISSED'}`,
  );
  console.log(`scale: workers=${o.workers} speedup=${speedup.toFixed(2)} busiest-share=${busiest.toFixed(2)}`);
}
