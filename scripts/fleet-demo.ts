/**
 * npm run fleet:demo: the compose topology on one machine without Docker. A Temporal dev server (SQLite file),
 * an S3-compatible server (Versity S3 Gateway over a local folder), the demo tile server, and 3 `tilebreaker
 * worker` processes, each in a working folder of its own, sharing nothing but the Temporal server and the
 * bucket. One mosaic from the demo tile server (with its outage) into s3://fleet/mosaics/; mid-run one worker
 * is killed with SIGKILL and a new one started, the S3 server is restarted, and the Temporal server is stopped
 * for 30 s and started again on its database. Last line:
 *   fleet: workers=3 killed=1 tiles=<int> ok=<int> missing=<int> refetched=<int> busiest-share=<float> store=s3 seconds=<float>
 * `missing`: planned tiles absent from the manifest or the output in the bucket; `refetched`: tiles the tile
 * server served more than once; `busiest-share`: the share of fetch batches run by the busiest worker.
 *
 * --soak MINUTES repeats mosaics for that long while killing workers and restarting the Temporal server, the
 * S3 server and the tile server at random (seeded: --seed). Last line:
 *   soak: minutes=<f> mosaics=<int> kills=<int> restarts=<int> missing=<int> duplicated=<int>
 * `duplicated`: tiles the tile server served more than once, over all the soak's mosaics; the line before it
 * lays each at the fault nearest its first serve: `duplicated by fault: kill= temporal= s3= tiles= none=`.
 *
 * SIGINT or SIGTERM stops it: its workers, the Temporal and S3 servers are stopped (killed after 30 s) and its
 * folder removed; exit status 130 or 143.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { Command } from 'commander';
import { localBinaries, packageRoot } from '../src/client/local-server';
import { startMosaic } from '../src/client/mosaics';
import { endOnSignals } from '../src/demo/children';
import { startLocalS3, type LocalS3 } from '../src/demo/s3-server';
import { startDemoTileServer, type DemoTileServer } from '../src/demo/tile-server';
import { tileBounds } from '../src/geo/mercator';
import type { MosaicRequest } from '../src/messages/mosaic-types';
import { duplicatesByFault, type FaultKind, type FaultWindow } from './fleet/duplicates';
import { batchesByWorker, missingTiles } from './fleet/measure';
import { temporalProcess, type TemporalProcess } from './fleet/temporal-process';
import { WorkerFleet } from './fleet/workers';
import { prng } from '../test/helpers/prng';

const TASK_QUEUE = 'fleet';
const BUCKET = 'fleet';
const PREFIX = `s3://${BUCKET}/mosaics`;

interface Stack {
  work: string;
  s3: LocalS3;
  temporal: TemporalProcess;
  tiles: DemoTileServer;
  /** When each tile was served (ms), by its path. */
  served: Map<string, number[]>;
  fleet: WorkerFleet;
  client: Client;
  connection: Connection;
  say: (line: string) => void;
  close(): Promise<void>;
}

/** The stack running, for a signal to stop. */
let current: Stack | null = null;

async function stack(latencyMs: number): Promise<Stack> {
  const t0 = Date.now();
  const say = (line: string) => console.log(`[+${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  const { cli } = localBinaries();
  if (!cli) throw new Error('fleet: no Temporal CLI; run bash scripts/setup-temporal.sh');
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-fleet-'));
  const s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(work, 's3'), bucket: BUCKET });
  const temporal = await temporalProcess(cli, path.join(work, 'temporal.sqlite'));
  await temporal.start();
  const served = new Map<string, number[]>();
  const tiles = await startDemoTileServer({ latencyMs, onServed: servedInto(served) });
  say(`Temporal on ${temporal.address}, S3 on ${s3.endpoint} (bucket ${BUCKET}), tile server on ${tiles.url}`);
  const fleet = new WorkerFleet(path.join(work, 'workers'), {
    ...s3.env,
    TEMPORAL_ADDRESS: temporal.address,
    TILEBREAKER_TASK_QUEUE: TASK_QUEUE,
    TILEBREAKER_OUTPUT_BUCKETS: PREFIX,
  });
  for (let i = 0; i < 3; i++) await fleet.start();
  say(
    `3 workers, each in its own folder under ${path.join(work, 'workers')}: ${fleet.live.map((w) => `${w.name} (pid ${w.pid})`).join(', ')}`,
  );
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection });
  let closing: Promise<void> | null = null;
  const st: Stack = {
    work,
    s3,
    temporal,
    tiles,
    served,
    fleet,
    client,
    connection,
    say,
    close() {
      // Once: a signal may arrive while the run closes it.
      closing ??= (async () => {
        await fleet.stopAll();
        await connection.close().catch(() => undefined);
        await temporal.stop();
        // The soak replaces the tile server when it restarts it.
        await st.tiles.close();
        await s3.stop();
        rmSync(work, { recursive: true, force: true });
      })();
      return closing;
    },
  };
  current = st;
  return st;
}

/** A square of `side` x `side` tiles at zoom 12, `offset` squares east of the first. */
function request(st: Stack, name: string, side: number, offset: number): MosaicRequest {
  const [x0, y0] = [1800 + offset * side, 1400];
  const nw = tileBounds(12, x0, y0);
  const se = tileBounds(12, x0 + side - 1, y0 + side - 1);
  return {
    source: { type: 'xyz', url: st.tiles.template, concurrency: 2 },
    sourceName: 'demo',
    // A metre inside the edges: an edge on a tile boundary may round into the next column.
    bbox: [nw.minX + 1, se.minY + 1, se.maxX - 1, nw.maxY - 1],
    crs: 'EPSG:3857',
    zoom: 12,
    output: `${PREFIX}/${name}.tif`,
    batchSize: 32,
    parallelBatches: 6,
    fallback: 'wait',
    deadline: '30m',
    maxTiles: side * side,
  };
}

/** Waits for the workflow to close, through Temporal outages; its status name. */
async function closed(st: Stack, workflowId: string, withinMs: number): Promise<string> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const status = await st.client.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        (d) => d.status.name,
        () => null,
      );
    if (status !== null && status !== 'RUNNING') return status;
    if (Date.now() > deadline)
      throw new Error(`fleet: ${workflowId} did not finish within ${Math.round(withinMs / 60_000)} min`);
    await delay(500);
  }
}

const servedTotal = (st: Stack) => [...st.served.values()].reduce((a, b) => a + b.length, 0);

/** Records each serve's time under the tile's path. */
function servedInto(served: Map<string, number[]>): (path: string) => void {
  return (p) => {
    const times = served.get(p);
    if (times) times.push(Date.now());
    else served.set(p, [Date.now()]);
  };
}

async function until(st: Stack, served: number): Promise<void> {
  while (servedTotal(st) < served) await delay(100);
}

async function demo(o: { side: number; latency: number; temporalDownS: number }): Promise<void> {
  const st = await stack(o.latency);
  const t0 = performance.now();
  try {
    const total = o.side * o.side;
    const req = request(st, 'demo', o.side, 0);
    const handle = await startMosaic(st.client, TASK_QUEUE, req);
    st.say(`mosaic ${handle.workflowId}: ${total} tiles into ${req.output}, fallback wait`);
    await until(st, Math.round(total * 0.15));
    const victim = st.fleet.live[1]!;
    await st.fleet.kill(victim);
    const fresh = await st.fleet.start();
    st.say(
      `${victim.name} killed with SIGKILL at ${servedTotal(st)} tiles served; ${fresh.name} (pid ${fresh.pid}) started`,
    );
    await until(st, Math.round(total * 0.3));
    await st.s3.stop();
    st.say(`S3 server stopped at ${servedTotal(st)} tiles served`);
    await delay(2_000);
    await st.s3.start();
    st.say('S3 server started again');
    await until(st, Math.round(total * 0.45));
    await st.temporal.stop();
    const servedBefore = servedTotal(st);
    st.say(`Temporal server stopped at ${servedBefore} tiles served, for ${o.temporalDownS} s`);
    await delay(o.temporalDownS * 1_000);
    await st.temporal.start();
    st.say(
      `Temporal server started again on its database (${servedTotal(st) - servedBefore} tiles served while it was down)`,
    );
    st.tiles.scheduleOutage(Math.round(total * 0.15), 8_000);
    st.say('the tile server will go down for 8 s in a while');
    const status = await closed(st, handle.workflowId, 20 * 60_000);
    const seconds = (performance.now() - t0) / 1000;
    st.say(`mosaic ${status}`);
    const { missing, ok } = await missingTiles(
      st.s3.client,
      req.output,
      req.output.replace(/\.tif$/, '.manifest.json'),
      total,
      o.side * 256,
      o.side * 256,
    );
    const refetched = [...st.served.values()].filter((t) => t.length > 1).length;
    const by = await batchesByWorker(st.client, handle.workflowId);
    const batches = [...by.values()].reduce((a, b) => a + b, 0);
    const busiest = Math.max(0, ...by.values());
    st.say(`fetch batches by worker: ${[...by.entries()].map(([id, n]) => `${st.fleet.nameOf(id)} ${n}`).join(', ')}`);
    st.say(
      `tile requests: ${st.tiles.stats.requests} (${st.tiles.stats.whileDown} while it was down); ${refetched} tiles served more than once`,
    );
    console.log(
      `targets: missing=0: ${missing === 0 ? 'met' : 'MISSED'}; refetched <= 64: ${refetched <= 64 ? 'met' : 'MISSED'}; busiest-share <= 0.6: ${batches && busiest / batches <= 0.6 ? 'met' : 'MISSED'}`,
    );
    console.log(
      `fleet: workers=3 killed=1 tiles=${total} ok=${ok} missing=${missing} refetched=${refetched} busiest-share=${batches ? (busiest / batches).toFixed(2) : 'NaN'} store=s3 seconds=${seconds.toFixed(1)}`,
    );
  } finally {
    await st.close();
  }
}

async function soak(o: { minutes: number; side: number; latency: number; seed: number }): Promise<void> {
  const st = await stack(o.latency);
  // The soak's faults are a function of --seed.
  const rand = prng(o.seed);
  const between = (lo: number, hi: number) => lo + rand() * (hi - lo);
  const t0 = Date.now();
  const endAt = t0 + o.minutes * 60_000;
  let kills = 0;
  let restarts = 0;
  let mosaics = 0;
  let missing = 0;
  let chaos = true;
  const windows: FaultWindow[] = [];
  /** Runs one fault, keeping its window: the duplicates' causes are read from them. */
  const strike = async (kind: FaultKind, run: () => Promise<void>) => {
    const startedAt = Date.now();
    await run();
    windows.push({ kind, startedAt, endedAt: Date.now() });
  };
  const faults = (async () => {
    while (chaos && Date.now() < endAt) {
      await delay(between(10_000, 40_000));
      if (!chaos || Date.now() >= endAt) break;
      const pick = Math.floor(rand() * 4);
      if (pick === 0 && st.fleet.live.length > 0) {
        const victim = st.fleet.live[Math.floor(rand() * st.fleet.live.length)]!;
        await strike('kill', () => st.fleet.kill(victim));
        const fresh = await st.fleet.start();
        kills++;
        st.say(`fault: ${victim.name} killed with SIGKILL; ${fresh.name} started`);
      } else if (pick === 1) {
        const s = between(5, 30);
        await strike('temporal', async () => {
          await st.temporal.stop();
          await delay(s * 1_000);
          await st.temporal.start();
        });
        restarts++;
        st.say(`fault: Temporal server down ${s.toFixed(0)} s, restarted`);
      } else if (pick === 2) {
        const s = between(1, 5);
        await strike('s3', async () => {
          await st.s3.stop(true);
          await delay(s * 1_000);
          await st.s3.start();
        });
        restarts++;
        st.say(`fault: S3 server killed, down ${s.toFixed(1)} s, restarted`);
      } else {
        const s = between(1, 10);
        const port = Number(new URL(st.tiles.url).port);
        await strike('tiles', async () => {
          await st.tiles.close();
          await delay(s * 1_000);
          st.tiles = await startDemoTileServer({ latencyMs: o.latency, port, onServed: servedInto(st.served) });
        });
        restarts++;
        st.say(`fault: tile server down ${s.toFixed(1)} s, restarted on the same port`);
      }
    }
  })();
  try {
    while (Date.now() < endAt) {
      const req = request(st, `soak-${mosaics}`, o.side, mosaics);
      const handle = await startWithRetry(st, req);
      const status = await closed(st, handle, 30 * 60_000);
      const total = o.side * o.side;
      const m = await missingTiles(
        st.s3.client,
        req.output,
        req.output.replace(/\.tif$/, '.manifest.json'),
        total,
        o.side * 256,
        o.side * 256,
      );
      missing += m.missing;
      mosaics++;
      st.say(`mosaic ${mosaics} ${status}: ok ${m.ok}/${total}, missing ${m.missing}`);
    }
  } finally {
    chaos = false;
    await faults;
  }
  const duplicated = [...st.served.values()].filter((t) => t.length > 1).length;
  const by = duplicatesByFault(st.served, windows);
  const minutes = (Date.now() - t0) / 60_000;
  await st.close();
  console.log(
    `duplicated by fault: ${Object.entries(by)
      .map(([k, n]) => `${k}=${n}`)
      .join(' ')}`,
  );
  console.log(
    `soak: minutes=${minutes.toFixed(1)} mosaics=${mosaics} kills=${kills} restarts=${restarts} missing=${missing} duplicated=${duplicated}`,
  );
}

/** Starts a mosaic, waiting out a Temporal server that is down at that moment; its workflow id. */
async function startWithRetry(st: Stack, req: MosaicRequest): Promise<string> {
  for (let i = 0; ; i++) {
    try {
      return (await startMosaic(st.client, TASK_QUEUE, req)).workflowId;
    } catch (err) {
      if (i >= 120) throw err;
      await delay(1_000);
    }
  }
}

function whole(flag: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`fleet: ${flag} must be a whole number >= ${min} (got ${JSON.stringify(v)})`);
  return n;
}

new Command('fleet:demo')
  .option('--side <n>', 'tiles per side of each mosaic (default 64; 32 with --soak)')
  .option('--latency <ms>', 'tile server latency per request', '150')
  .option('--temporal-down <s>', 'how long the Temporal server is stopped mid-run', '30')
  .option('--soak <minutes>', 'instead: repeat mosaics for this long under random faults')
  .option('--seed <n>', 'with --soak: the seed of the faults', '1')
  .action(async (f: { side?: string; latency: string; temporalDown: string; soak?: string; seed: string }) => {
    // Node would end at once and leave the workers and servers running; children not stopped in time are killed as it exits.
    endOnSignals(async () => current?.close(), { say: (line) => console.log(`fleet: ${line}`) });
    const latency = whole('--latency', f.latency, 0);
    if (f.soak !== undefined) {
      const minutes = Number(f.soak);
      if (!(minutes > 0))
        throw new Error(`fleet: --soak must be a positive number of minutes (got ${JSON.stringify(f.soak)})`);
      await soak({ minutes, side: whole('--side', f.side ?? '32', 2), latency, seed: whole('--seed', f.seed, 0) });
    } else {
      await demo({
        side: whole('--side', f.side ?? '64', 2),
        latency,
        temporalDownS: whole('--temporal-down', f.temporalDown, 0),
      });
    }
  })
  .parseAsync()
  .catch((err: unknown) => {
    console.error(err instanceof Error && err.message.startsWith('fleet:') ? err.message : err);
    process.exit(1);
  });
