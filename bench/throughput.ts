/**
 * bench:throughput: a mosaic of --side 64: 64 x 64 = 4,096 tiles from a local tile server, built through Temporal (dev
 * server, one worker: plan, fetch batches through the fleet-wide breaker, assembly) and by a plain script
 * that calls the same planning, fetch (undici + validation + tile store) and stitching code directly with no
 * Temporal and no breaker, at the same concurrency (source concurrency x batches in flight). Prints details,
 * then one line:
 *   throughput: orchestrated=<tiles/s> plain=<tiles/s> ratio=<float> history-events-per-1000-tiles=<int>
 * History events count every workflow of the job (the mosaic and its children, if any). The breaker
 * entity is shared by every job on the endpoint and is reported apart.
 * Then the metrics overhead (target: within 2 %, bench/throughput/metrics-overhead.ts): the same mosaic built
 * by `tilebreaker worker` processes with metrics off and with `--metrics-addr` on (scraped every second),
 * alternating, --metrics-rounds of each (default 3; 0 skips it):
 *   metrics: off=<tiles/s> on=<tiles/s> ratio=<on/off> cpu-off-s=<median> cpu-on-s=<median>
 * and just before the last line the COG comparison (bench/throughput/cog.ts: the plain run's tiles written as
 * a COG by the stitch, then by gdal_translate -of COG from a VRT of them; -1 where GDAL is not installed):
 *   cog: tilebreaker-s=<float> gdal-s=<float> ratio=<tilebreaker/gdal>
 * With --workers N it measures instead how one mosaic spreads over a fleet of worker processes
 * (bench/throughput/scale.ts; last line `scale: ...`); with --store s3, the local disk against a bucket on a
 * loopback S3 server (bench/throughput/store.ts; last line `store: ...`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { Command } from 'commander';
import { assembleMosaic } from '../src/activities/mosaic/assemble';
import { makeMosaicBatch } from '../src/activities/mosaic/batch';
import { planMosaic } from '../src/activities/mosaic/plan';
import { EndpointPools } from '../src/activities/http/endpoint-pool';
import { breakerKey, breakerWorkflowId } from '../src/breaker';
import { tileBounds } from '../src/geo/mercator';
import { startEmbeddedServer } from '../src/client/embedded-server';
import { startMosaic } from '../src/client/mosaics';
import { createWorker } from '../src/client/worker';
import { DEFAULT_BATCH_SIZE } from '../src/messages/mosaic-request';
import type { MosaicRequest, MosaicResult } from '../src/messages/mosaic-types';
import { fetchPhase } from './throughput/history';
import { metricsLine, metricsTarget, runMetricsOverhead, type OverheadFigures } from './throughput/metrics-overhead';
import { runCog, type CogFigures } from './throughput/cog';
import { runScale } from './throughput/scale';
import { runStore } from './throughput/store';
import { startServer } from './throughput/server';

Runtime.install({ logger: new DefaultLogger('WARN') });

interface Opts {
  side: string;
  concurrency: string;
  batches: string;
  batchSize: string;
  latency: string;
  blockTiles?: string;
  metricsRounds: string;
}

type Flags = Partial<Opts> & { workers?: string; fetchBatches?: string; store?: string; rounds?: string };

/** The defaults of each mode: the orchestration-cost run, and --workers (latency-bound, one worker not CPU-bound). */
// The batch size is the product's default: the history figure is what a mosaic started with defaults costs.
const DEFAULTS: Opts = {
  side: '64',
  concurrency: '8',
  batches: '4',
  batchSize: String(DEFAULT_BATCH_SIZE),
  latency: '10',
  metricsRounds: '3',
};
const SCALE_DEFAULTS: Omit<Opts, 'metricsRounds'> = {
  side: '32',
  concurrency: '2',
  batches: '6',
  batchSize: '32',
  latency: '50',
};

function count(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`bench:throughput: ${flag} must be a whole number >= ${min} (got ${JSON.stringify(value)})`);
  return n;
}

function dispatch(f: Flags): Promise<void> {
  if (f.store !== undefined && f.store !== 'local') {
    if (f.store !== 's3')
      throw new Error(`bench:throughput: --store must be local or s3 (got ${JSON.stringify(f.store)})`);
    if (f.workers !== undefined || f.metricsRounds !== undefined || f.blockTiles !== undefined)
      throw new Error('bench:throughput: --store s3 runs alone (no --workers, --metrics-rounds or --block-tiles)');
    const o = { ...DEFAULTS, ...f };
    return runStore({
      side: count('--side', o.side, 1),
      concurrency: count('--concurrency', o.concurrency, 1),
      batches: count('--batches', o.batches, 1),
      batchSize: count('--batch-size', o.batchSize, 1),
      latency: count('--latency', o.latency, 0),
      rounds: count('--rounds', f.rounds ?? '2', 1),
    });
  }
  if (f.rounds !== undefined) throw new Error('bench:throughput: --rounds is used with --store s3');
  if (f.workers === undefined) {
    const o = { ...DEFAULTS, ...f };
    return main(o, count('--metrics-rounds', o.metricsRounds, 0));
  }
  if (f.blockTiles !== undefined)
    throw new Error('bench:throughput: --block-tiles is not used with --workers (the mosaic runs in one workflow)');
  if (f.metricsRounds !== undefined)
    throw new Error(
      'bench:throughput: --metrics-rounds is not used with --workers (the metrics comparison runs after the default one)',
    );
  const o = { ...SCALE_DEFAULTS, ...f };
  return runScale({
    workers: count('--workers', f.workers, 2),
    side: count('--side', o.side, 1),
    concurrency: count('--concurrency', o.concurrency, 1),
    batches: count('--batches', o.batches, 1),
    batchSize: count('--batch-size', o.batchSize, 1),
    latency: count('--latency', o.latency, 0),
    ...(f.fetchBatches !== undefined ? { fetchBatches: count('--fetch-batches', f.fetchBatches, 1) } : {}),
  });
}

async function inPool<T>(items: T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** Events of each type, summed over the histories read (where a mosaic's events go). */
const byType = new Map<string, number>();

async function historyEvents(client: Client, workflowId: string, tally = false): Promise<number> {
  const h = await client.workflow.getHandle(workflowId).fetchHistory();
  for (const e of tally ? (h.events ?? []) : []) {
    const kind = Object.keys(e).find((k) => k.endsWith('EventAttributes') && e[k as keyof typeof e]) ?? 'unknown';
    const name = kind.replace(/EventAttributes$/, '');
    byType.set(name, (byType.get(name) ?? 0) + 1);
  }
  return h.events?.length ?? 0;
}

async function main(o: Opts, metricsRounds: number): Promise<void> {
  const side = Number(o.side);
  const z = 12;
  const [x0, y0] = [2100, 1400];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + side - 1, y0 + side - 1);
  const server = await startServer(Number(o.latency));
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-throughput-'));
  const request = (name: string): MosaicRequest => ({
    source: { type: 'xyz', url: `${server.url}/{z}/{x}/{y}.png`, concurrency: Number(o.concurrency) },
    sourceName: 'bench',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: z,
    output: path.join(work, name, 'mosaic.tif'),
    batchSize: Number(o.batchSize),
    parallelBatches: Number(o.batches),
    maxTiles: side * side,
    ...(o.blockTiles ? { blockTiles: Number(o.blockTiles) } : {}),
  });
  const total = side * side;
  console.log(
    `bench:throughput: ${side} x ${side} = ${total} tiles of 256 px, ${o.concurrency} requests per batch x ${o.batches} batches = ${Number(o.concurrency) * Number(o.batches)} in flight, batches of ${o.batchSize}, server latency ${o.latency} ms`,
  );

  // Plain: the same activity code called directly, no Temporal, no breaker. Run before and after the
  // orchestrated one; the faster of the two is the baseline (the stricter comparison).
  const plainRun = async (name: string) => {
    const pools = new EndpointPools();
    const fetchBatch = makeMosaicBatch({ pools });
    const t0 = performance.now();
    const plan = await planMosaic({ ...request(name), breaker: false });
    const starts = Array.from({ length: Math.ceil(total / plan.batchSize) }, (_, k) => k * plan.batchSize);
    await inPool(starts, plan.parallelBatches, async (start) => {
      await fetchBatch({
        plan,
        tiles: { start, count: Math.min(plan.batchSize, total - start) },
        pass: 0,
        batchId: `p0-b0-${start}`,
        whenRefused: 'defer',
        final: true,
      });
    });
    const fetchS = (performance.now() - t0) / 1000;
    const r = await assembleMosaic({ plan, partial: false });
    const s = (performance.now() - t0) / 1000;
    await pools.close();
    console.log(
      `  plain (${name.padEnd(7)}) ${s.toFixed(1)} s: fetch ${fetchS.toFixed(1)} s, assemble ${(s - fetchS).toFixed(1)} s; ok ${r.counts.ok}/${total}`,
    );
    return { s, fetchS };
  };
  const plainA = await plainRun('plain-1');

  // Orchestrated: a dev server (its own database) and one worker in this process.
  const temporal = await startEmbeddedServer({ dbFile: path.join(work, 'temporal.sqlite') });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: temporal.namespace });
  const nativeConnection = await NativeConnection.connect({ address: temporal.address });
  const taskQueue = 'bench-throughput';
  const worker = await createWorker({
    connection: nativeConnection,
    client,
    namespace: temporal.namespace,
    taskQueue,
    roots: { sources: [work], outputs: [work] },
  });
  const running = worker.run();
  let result: MosaicResult;
  let t: number;
  const id = `bench-throughput-${Date.now()}`;
  try {
    t = performance.now();
    const handle = await startMosaic(client, taskQueue, request('orchestrated'), id);
    result = await handle.result();
  } finally {
    worker.shutdown();
    await running;
  }
  const orchS = (performance.now() - t) / 1000;
  // The fetch phase: from the planning activity's completion to the assembly's scheduling.
  const [from, to] = fetchPhase((await client.workflow.getHandle(id).fetchHistory()).events ?? []);
  const orchFetchS = (to - from) / 1000;
  // Every workflow of the job: the mosaic and any block children.
  let eventCount = await historyEvents(client, id, true);
  let workflows = 1;
  for await (const wf of client.workflow.list({ query: `WorkflowId STARTS_WITH "${id}/"` })) {
    eventCount += await historyEvents(client, wf.workflowId, true);
    workflows++;
  }
  const entityEvents = await historyEvents(client, breakerWorkflowId(breakerKey(server.url))).catch(() => 0);
  await connection.close();
  await nativeConnection.close();
  await temporal.stop();
  console.log(
    `  orchestrated      ${orchS.toFixed(1)} s: fetch ${orchFetchS.toFixed(1)} s; ok ${result.counts.ok}/${total}; ${workflows} workflow(s), ${eventCount} history events; breaker entity (shared, not counted) ${entityEvents} events`,
  );
  console.log(
    `  history events by type: ${[...byType]
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  const plainB = await plainRun('plain-2');

  const best = plainA.s <= plainB.s ? plainA : plainB;
  const orchestrated = total / orchS;
  const plain = total / best.s;
  const perK = Math.round((eventCount / total) * 1000);
  console.log(
    `  fetch phase alone: orchestrated ${(total / orchFetchS).toFixed(1)} tiles/s, plain ${(total / best.fetchS).toFixed(1)} tiles/s (ratio ${(best.fetchS / orchFetchS).toFixed(3)}); both stitch the same ${side * 256} px square TIFF`,
  );
  // Metrics off against on, in worker processes of their own (Runtime.install is once per process).
  let metrics: OverheadFigures | null = null;
  let cog: CogFigures;
  try {
    // The second plain run's tiles, written as a COG both ways.
    cog = await runCog({
      storeRoot: path.join(work, 'plain-2', 'mosaic.tiles'),
      source: 'bench',
      z,
      x0,
      y0,
      side,
      bounds: { minX: nw.minX, minY: se.minY, maxX: se.maxX, maxY: nw.maxY },
      work,
    });
    console.log(
      `  COG of the same ${side * 256} px square: tilebreaker's stitch ${cog.tilebreakerS.toFixed(2)} s (validator: ${cog.valid.tilebreaker ?? 'not installed'}), ` +
        (cog.gdalS === null
          ? 'gdal_translate not installed'
          : `gdal_translate -of COG from a VRT of the tiles ${cog.gdalS.toFixed(2)} s (validator: ${cog.valid.gdal ?? 'not installed'})`),
    );
    if (metricsRounds > 0) metrics = await runMetricsOverhead({ rounds: metricsRounds, tiles: total, request, work });
  } finally {
    server.stop();
    rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `targets: ratio >= 0.8: ${orchestrated / plain >= 0.8 ? 'met' : 'MISSED'}; <= 50 history events per 1000 tiles: ${perK <= 50 ? 'met' : 'MISSED'}${metrics ? `; ${metricsTarget(metrics)}` : ''}`,
  );
  const cogRatio = cog.gdalS === null ? -1 : cog.tilebreakerS / cog.gdalS;
  // A fast file that is not a valid COG is no result: both must pass the validator (where it is installed).
  const invalid = Object.entries(cog.valid).filter(([, v]) => v !== null && v !== 'valid');
  const cogVerdict =
    cog.gdalS === null
      ? 'n/a (no GDAL figure)'
      : invalid.length > 0
        ? `MISSED (not a valid COG: ${invalid.map(([k, v]) => `${k}: ${v}`).join('; ')})`
        : cogRatio <= 1
          ? 'met'
          : 'MISSED';
  console.log(`cog target: ratio <= 1.0, both valid COGs: ${cogVerdict}`);
  if (metrics) console.log(metricsLine(metrics));
  console.log(
    `cog: tilebreaker-s=${cog.tilebreakerS.toFixed(2)} gdal-s=${cog.gdalS === null ? -1 : cog.gdalS.toFixed(2)} ratio=${cog.gdalS === null ? -1 : cogRatio.toFixed(3)}`,
  );
  console.log(
    `throughput: orchestrated=${orchestrated.toFixed(1)} plain=${plain.toFixed(1)} ratio=${(orchestrated / plain).toFixed(3)} history-events-per-1000-tiles=${perK}`,
  );
}

new Command('bench:throughput')
  .option('--side <n>', 'tiles per side of the square mosaic (default 64; with --workers 32)')
  .option(
    '--concurrency <n>',
    'the source concurrency: requests in flight per worker process (default 8; with --workers 2)',
  )
  .option('--batches <n>', 'batches in flight (default 4; with --workers 6)')
  .option('--batch-size <n>', `tiles per batch (default ${DEFAULT_BATCH_SIZE}, the product's; with --workers 32)`)
  .option('--latency <ms>', 'tile server latency per request (default 10; with --workers 50)')
  .option('--block-tiles <n>', "tiles per child workflow (default: the planner's, 16384)")
  .option(
    '--metrics-rounds <n>',
    'rounds of the metrics comparison after it: worker processes with metrics off, then on (default 3; 0 skips it)',
  )
  .option(
    '--fetch-batches <n>',
    "with --workers: each worker's cap on fetch batches at once (default: the worker's, 2)",
  )
  .option(
    '--store <local|s3>',
    'with s3, instead: the same mosaic with everything on the local disk, then in a bucket on a loopback S3 server, alternating (last line store: ...)',
  )
  .option('--rounds <n>', 'with --store s3: runs of each (default 2)')
  .option(
    '--workers <n>',
    'instead: the same mosaic with 1 worker process, then with N (fetch phases, batches per worker; last line scale: ...)',
  )
  .action((f: Flags) => dispatch(f))
  .parseAsync()
  .catch((err: unknown) => {
    // A bad flag is named with its value; anything else keeps its stack.
    console.error(err instanceof Error && err.message.startsWith('bench:throughput:') ? err.message : err);
    process.exit(1);
  });
