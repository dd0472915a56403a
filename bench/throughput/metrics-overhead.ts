/**
 * bench:throughput's metrics-overhead comparison (target: metrics on within 2 % of metrics off).
 * `Runtime.install` is once per process, so "off" and "on" are separate `tilebreaker worker` processes: for
 * each round, one worker with metrics off builds the mosaic, then one with `--metrics-addr 127.0.0.1:<free
 * port>` builds it again (a new output and workflow id each time), one worker process at a time on one task
 * queue of its own dev server. While an "on" worker runs, its /metrics is scraped every second (stricter
 * than Prometheus' default 15 s); a run whose scrapes never held `tilebreaker_requests_total` fails the bench,
 * since then nothing was exported. Each run's wall time (start to result), fetch phase (from the history) and
 * the worker process's CPU time over the run (Linux /proc) are printed, then the medians side by side; the
 * caller prints `metricsLine` and `metricsTarget`.
 */
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { startEmbeddedServer } from '../../src/client/embedded-server';
import { startMosaic } from '../../src/client/mosaics';
import { METRICS_ADDR_ENV, metricsUrl } from '../../src/client/telemetry';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { fetchPhase, histories } from './history';
import { procStat, stopWorker, workerProcess } from './worker-process';

export type Metrics = 'off' | 'on';

/** What a metrics-on run's scrapes saw. */
export interface Scrapes {
  /** Scrapes answered (HTTP 200). */
  n: number;
  failed: number;
  /** Answers that held a tilebreaker_requests_total series. */
  withRequests: number;
  maxBytes: number;
}

export interface OverheadRun {
  metrics: Metrics;
  round: number;
  wallS: number;
  fetchS: number;
  /** The worker process's CPU time (user + system, every thread) from the mosaic's start to its result. */
  cpuS: number;
  ok: number;
  scrapes?: Scrapes;
}

export interface Medians {
  runs: number;
  tilesPerS: number;
  wallS: number;
  fetchS: number;
  cpuS: number;
}

export interface OverheadFigures {
  off: Medians;
  on: Medians;
  /** on / off of the median tiles per second over the whole run. */
  ratio: number;
}

/** The target: metrics on within 2 % of off. */
export const MIN_RATIO = 0.98;

export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The medians of each side over its runs (tiles per second from each run's whole wall time). */
export function overheadFigures(tiles: number, runs: OverheadRun[]): OverheadFigures {
  const side = (m: Metrics): Medians => {
    const rs = runs.filter((r) => r.metrics === m);
    return {
      runs: rs.length,
      tilesPerS: median(rs.map((r) => tiles / r.wallS)),
      wallS: median(rs.map((r) => r.wallS)),
      fetchS: median(rs.map((r) => r.fetchS)),
      cpuS: median(rs.map((r) => r.cpuS)),
    };
  };
  const off = side('off');
  const on = side('on');
  return { off, on, ratio: on.tilesPerS / off.tilesPerS };
}

/** The summary line scripts read (just before bench:throughput's last line). */
export function metricsLine(f: OverheadFigures): string {
  return `metrics: off=${f.off.tilesPerS.toFixed(1)} on=${f.on.tilesPerS.toFixed(1)} ratio=${f.ratio.toFixed(3)} cpu-off-s=${f.off.cpuS.toFixed(2)} cpu-on-s=${f.on.cpuS.toFixed(2)}`;
}

/** The target's mention on the `targets:` line. */
export function metricsTarget(f: OverheadFigures): string {
  return `metrics on within 2 % of off: ${f.ratio >= MIN_RATIO ? 'met' : 'MISSED'}`;
}

/** The medians side by side. */
export function mediansTable(f: OverheadFigures): string[] {
  const row = (label: string, off: string, on: string) => `    ${label.padEnd(16)}${off.padStart(9)}${on.padStart(9)}`;
  return [
    `  metrics medians (${f.off.runs} off, ${f.on.runs} on):`,
    row('', 'off', 'on'),
    row('wall s', f.off.wallS.toFixed(1), f.on.wallS.toFixed(1)),
    row('tiles/s', f.off.tilesPerS.toFixed(1), f.on.tilesPerS.toFixed(1)),
    row('fetch phase s', f.off.fetchS.toFixed(2), f.on.fetchS.toFixed(2)),
    row('worker cpu s', f.off.cpuS.toFixed(2), f.on.cpuS.toFixed(2)),
  ];
}

/** A port free on 127.0.0.1 now (the OS's pick). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/** Whether a Prometheus text exposition holds a tilebreaker_requests_total sample (not just its HELP or TYPE). */
export function holdsRequests(exposition: string): boolean {
  return /^tilebreaker_requests_total[{ ]/m.test(exposition);
}

/** Scrapes `url` every second until stopped, one scrape at a time. */
function scraper(url: string): { stop: () => Promise<Scrapes> } {
  const s: Scrapes = { n: 0, failed: 0, withRequests: 0, maxBytes: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const next = delay(1_000);
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        const text = await res.text();
        if (res.ok) {
          s.n++;
          s.maxBytes = Math.max(s.maxBytes, text.length);
          if (holdsRequests(text)) s.withRequests++;
        } else s.failed++;
      } catch {
        s.failed++;
      }
      await next;
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return s;
    },
  };
}

export interface OverheadOpts {
  rounds: number;
  tiles: number;
  /** The mosaic's request for a new output named `name` under `work`. */
  request: (name: string) => MosaicRequest;
  /** The folder outputs go under (the workers' roots) and the dev server's database. */
  work: string;
}

export async function runMetricsOverhead(o: OverheadOpts): Promise<OverheadFigures> {
  console.log(
    `  metrics overhead: the same mosaic by one \`tilebreaker worker\` process at a time, metrics off then on (scraped every 1 s), ${o.rounds} round(s); load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const temporal = await startEmbeddedServer({ dbFile: path.join(o.work, 'temporal-metrics.sqlite') });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: temporal.namespace });
  // One task queue for every run: the breaker entity the first run starts lives on it and later workers serve it.
  const env = {
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_NAMESPACE: temporal.namespace,
    TILEBREAKER_TASK_QUEUE: 'bench-metrics',
    TILEBREAKER_OUTPUT_DIR: o.work,
    TILEBREAKER_SOURCES_DIR: o.work,
    TILEBREAKER_LOG_LEVEL: 'WARN',
    // Off means off, whatever the caller's environment says (an empty value is unset).
    [METRICS_ADDR_ENV]: '',
  };

  const run = async (metrics: Metrics, round: number): Promise<OverheadRun> => {
    const addr = metrics === 'on' ? `127.0.0.1:${await freePort()}` : null;
    const child: ChildProcess = await workerProcess(env, addr ? ['--metrics-addr', addr] : []);
    try {
      await delay(1_000); // polling before the mosaic starts
      const name = `metrics-${metrics}-${round}`;
      const id = `bench-${name}-${Date.now()}`;
      const scrape = addr ? scraper(metricsUrl(addr)) : null;
      const cpu0 = procStat(child.pid!)?.seconds ?? NaN;
      const t0 = performance.now();
      const result = await startMosaic(client, env.TILEBREAKER_TASK_QUEUE, o.request(name), id).then((h) => h.result());
      const wallS = (performance.now() - t0) / 1000;
      const cpuS = (procStat(child.pid!)?.seconds ?? NaN) - cpu0;
      const scrapes = await scrape?.stop();
      const [from, to] = fetchPhase((await histories(client, id))[0]!);
      // Outputs are large (a 16,384 px TIFF and its tiles): keep one at a time on disk.
      rmSync(path.join(o.work, name), { recursive: true, force: true });
      const r: OverheadRun = {
        metrics,
        round,
        wallS,
        fetchS: (to - from) / 1000,
        cpuS,
        ok: result.counts.ok,
        ...(scrapes ? { scrapes } : {}),
      };
      const seen = scrapes
        ? `; ${scrapes.n} scrapes (${scrapes.failed} failed), ${scrapes.withRequests} with tilebreaker_requests_total, largest ${(scrapes.maxBytes / 1024).toFixed(0)} KiB`
        : '';
      console.log(
        `  metrics ${metrics.padEnd(3)} (round ${round}) ${wallS.toFixed(1)} s (${(o.tiles / wallS).toFixed(1)} tiles/s): fetch ${r.fetchS.toFixed(1)} s; worker cpu ${cpuS.toFixed(2)} s; ok ${r.ok}/${o.tiles}${seen}`,
      );
      if (scrapes && scrapes.withRequests === 0) {
        throw new Error(
          `bench:throughput: the metrics-on worker's ${metricsUrl(addr!)} never held tilebreaker_requests_total over ${scrapes.n} scrapes (${scrapes.failed} failed): nothing was exported`,
        );
      }
      return r;
    } finally {
      await stopWorker(child);
    }
  };

  const runs: OverheadRun[] = [];
  try {
    for (let round = 1; round <= o.rounds; round++) {
      runs.push(await run('off', round));
      runs.push(await run('on', round));
    }
  } finally {
    await connection.close();
    await temporal.stop();
  }
  const f = overheadFigures(o.tiles, runs);
  for (const line of mediansTable(f)) console.log(line);
  return f;
}
