#!/usr/bin/env node
/**
 * A hang on a slow real renderer (`npm run bench:renderer-hang`): MapServer 8 behind lighttpd, through the
 * fault proxy, which holds each GetMap for a render time (uniform around --render-ms) before MapServer draws it;
 * a mosaic of 1,024 tiles at zoom 10 fetched as 4 x 4 metatiles with a 64 px buffer under the project's
 * default breaker; after --after GetMaps every new GetMap hangs for --hang-s seconds (the ones already
 * rendering finish, as on a renderer whose queue stopped), then the held connections drop and the server
 * answers again. The same worker and the same breaker key serve every run, as a night's worker would: what
 * the guard learned in one hang is there in the next. Per run: when the breaker opened (from the hang's
 * start), by which rule, the requests after the open, opens after the recovery, and the tiles' statuses.
 *
 * The baseline beside each trip is the stall threshold the run's own answers give (their p95 plus four mean
 * deviations: latency.ts): the first moment any call started at the hang's start can count as stalled.
 *
 * Last line: `renderer-hang: trip-s=A,B,C max=M threshold-s=... after-recovery-opens=N missing=N`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command, InvalidArgumentError } from 'commander';
import { breakerKey, type TransitionRecord } from '../src/breaker';
import { InFlightCalls } from '../src/activities/guard/in-flight';
import { adminBreaker, breakerTransitions } from '../src/client/breakers';
import { exitCodeFor, startMosaic } from '../src/client/mosaics';
import { resolution } from '../src/geo/mercator';
import type { MosaicRequest } from '../src/messages/mosaic-types';
import { startFaultProxy } from '../test/helpers/fault-proxy';
import { startWms, wmsAvailable } from '../test/helpers/mapserver';
import { assertAccounted, readManifest } from '../test/helpers/mosaic';
import { prng } from '../test/helpers/prng';
import { startBenchTemporal } from './outage/bench-temporal';

const Z = 10;
const SIDE = 32 * 256 * resolution(Z);

function num(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min)
      throw new InvalidArgumentError(`expected a number >= ${min} (got ${JSON.stringify(value)})`);
    return n;
  };
}

interface RunFigures {
  tripS: number | null;
  reason: string;
  afterOpen: number;
  afterRecoveryOpens: number;
  statuses: string;
  missing: number;
  exit: number;
  /** The stall threshold the run's answers before the hang give (ms). */
  thresholdMs: number;
  p95Ms: number;
}

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(0.95 * sorted.length) - 1)] ?? 0;
}

/** The stall threshold a guard that saw these answers would use: the guard's own rule (in-flight.ts). */
function thresholdOf(values: number[]): number {
  const calls = new InFlightCalls();
  for (const latencyMs of values) {
    const call = {};
    calls.start(call, 'run', 0);
    calls.end(call, { latencyMs });
  }
  return calls.thresholdMs('run');
}

/** N busy processes, so the run meets a loaded machine as the nights do. */
function hogs(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

async function main(): Promise<void> {
  const o = new Command('bench:renderer-hang')
    .description('a hang on a real MapServer that renders in seconds, metatiled, under the default breaker')
    .option('--runs <n>', 'hangs, one mosaic each, against the same worker and breaker', num(1), 3)
    .option(
      '--render-ms <ms>',
      'mean render time the proxy adds before MapServer draws (each 0.8x..1.2x)',
      num(0),
      2500,
    )
    .option('--after <n>', 'GetMaps answered before the hang', num(0), 13)
    .option('--hang-s <s>', 'how long the hang lasts', num(1), 20)
    .option('--load <n>', 'busy processes beside the run', num(0), 2)
    .option('--seed <n>', 'seed of the render times', num(0), 1)
    .option(
      '--slowdown <factor>',
      'instead of a hang: after --after GetMaps, every render takes this many times as long (a renderer slowed, not stopped; the breaker should stay closed)',
      num(1),
    )
    .parse()
    .opts<{
      runs: number;
      renderMs: number;
      after: number;
      hangS: number;
      load: number;
      seed: number;
      slowdown?: number;
    }>();
  if (!wmsAvailable())
    throw new Error('bench:renderer-hang needs cgi-mapserver, lighttpd and gdal-bin (.ci/run installs them)');
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const log = (m: string) => console.error(`[bench:renderer-hang ${new Date().toISOString().slice(11, 19)}] ${m}`);
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-renderer-hang-'));
  const wms = await startWms({ extent: [0, 0, SIDE, SIDE] });
  const temporal = await startBenchTemporal('renderer-hang', log, { roots: { sources: [dir], outputs: [dir] } });
  const proxy = await startFaultProxy(wms.url);
  const random = prng(o.seed);
  // A slowdown: from this request of the proxy's log on, every render is o.slowdown times as long.
  let slowFrom = Infinity;
  let slowAt: number | null = null;
  proxy.renderTime(() => {
    const slow = proxy.log.length > slowFrom;
    if (slow && slowAt === null) slowAt = Date.now();
    return (slow ? o.slowdown! : 1) * o.renderMs * (0.8 + 0.4 * random());
  });
  const key = breakerKey(proxy.url);
  const busy = hogs(o.load);
  const runs: RunFigures[] = [];
  try {
    for (let run = 1; run <= o.runs; run++) {
      const since = Date.now();
      const before = proxy.log.length;
      slowFrom = Infinity;
      slowAt = null;
      if (o.slowdown === undefined) proxy.schedule({ mode: 'hang', afterRequests: o.after, forMs: o.hangS * 1000 });
      else slowFrom = before + o.after;
      const request: MosaicRequest = {
        source: {
          type: 'wms',
          url: proxy.url,
          version: '1.3.0',
          layers: ['quadrants'],
          transparent: false,
          metatile: { size: [4, 4], buffer: 64 },
        },
        sourceName: 'renderer',
        crs: 'EPSG:3857',
        bbox: [1, 1, SIDE - 1, SIDE - 1],
        zoom: Z,
        output: path.join(dir, `run-${run}.tif`),
        storeRoot: path.join(dir, 'store'),
        fallback: 'wait',
        deadline: '15m',
      };
      const handle = await startMosaic(
        temporal.client,
        temporal.taskQueue,
        request,
        `renderer-hang-${process.pid}-${run}`,
      );
      const result = await handle.result();
      await proxy.settled();
      const manifest = readManifest(result);
      const startedAt = o.slowdown === undefined ? proxy.faultStartedAt! : (slowAt ?? Date.now());
      const recoveredAt = o.slowdown === undefined ? (proxy.recoveredAt ?? Date.now()) : Date.now();
      const transitions: TransitionRecord[] = (await breakerTransitions(temporal.client, key))
        .filter((t) => t.at >= since)
        .reverse();
      const trip =
        transitions.find(
          (t) => t.from === 'closed' && t.to === 'open' && t.at >= (o.slowdown === undefined ? startedAt : since),
        ) ?? null;
      const answers = proxy.log
        .slice(before)
        .filter((r) => r.at < startedAt && r.upstreamMs !== undefined && !r.selfProbe)
        .map((r) => r.upstreamMs!);
      const f: RunFigures = {
        tripS: trip ? (trip.at - startedAt) / 1000 : null,
        reason: trip ? trip.detail : 'no trip',
        afterOpen: trip ? proxy.log.filter((r) => r.at > trip.at && r.at < recoveredAt && !r.selfProbe).length : 0,
        afterRecoveryOpens: transitions.filter((t) => t.from === 'closed' && t.to === 'open' && t.at > recoveredAt)
          .length,
        statuses: Object.entries(manifest.counts)
          .filter(([, n]) => n > 0)
          .map(([s, n]) => `${s}=${n}`)
          .join(','),
        missing: assertAccounted(manifest) === null ? 1024 - manifest.total : 1024,
        exit: exitCodeFor(result),
        thresholdMs: thresholdOf(answers),
        p95Ms: p95(answers),
      };
      runs.push(f);
      log(
        `run ${run}: trip-s ${f.tripS?.toFixed(2) ?? '-'} (threshold ${(f.thresholdMs / 1000).toFixed(2)} s, render p95 ${f.p95Ms} ms over ${answers.length} answers); ` +
          `${f.afterOpen} requests after the open; ${f.afterRecoveryOpens} opens after the recovery; ${f.statuses}; exit ${f.exit}`,
      );
      log(`run ${run}: ${f.reason}`);
      // A fresh breaker for the next hang; the worker keeps what it learned.
      await adminBreaker(temporal.client, key, 'reset', { reason: 'bench: next run' });
    }
  } finally {
    for (const b of busy) b.kill('SIGKILL');
    await proxy.close();
    await temporal.close((m) => log(`worker: ${m}`));
    await wms.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const trips = runs.map((r) => (r.tripS === null ? -1 : r.tripS));
  if (o.slowdown === undefined)
    console.log(
      `target: each hang opens the breaker within 8 s: ${trips.every((s) => s >= 0 && s <= 8) ? 'met' : 'MISSED'}`,
    );
  else
    console.log(
      `target: a renderer ${o.slowdown}x slower never opens the breaker: ${trips.every((s) => s < 0) ? 'met' : 'MISSED'}`,
    );
  console.log(
    `renderer-hang: trip-s=${trips.map((s) => s.toFixed(2)).join(',')} max=${Math.max(...trips).toFixed(2)} ` +
      `threshold-s=${runs.map((r) => (r.thresholdMs / 1000).toFixed(2)).join(',')} ` +
      `after-open=${runs.map((r) => r.afterOpen).join(',')} after-recovery-opens=${runs.reduce((a, r) => a + r.afterRecoveryOpens, 0)} ` +
      `missing=${runs.reduce((a, r) => a + r.missing, 0)}`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
