/**
 * bench:throughput --store s3: the same mosaic built through Temporal with everything on the local disk, then
 * with everything in a bucket on a loopback S3 server (tile store, plan, journals, mask, manifest, outputs),
 * alternating, --rounds of each; one worker in this process, a fresh store for every run, so every tile is
 * fetched and written each time. Last line:
 *   store: local=<tiles/s> s3=<tiles/s> ratio=<s3/local> store=s3
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { resetS3Client } from '../../src/activities/storage/s3-client';
import { startEmbeddedServer } from '../../src/client/embedded-server';
import { packageRoot } from '../../src/client/local-server';
import { startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { startLocalS3 } from '../../src/demo/s3-server';
import { tileBounds } from '../../src/geo/mercator';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { fetchPhase } from './history';
import { startServer } from './server';

export interface StoreOptions {
  side: number;
  concurrency: number;
  batches: number;
  batchSize: number;
  latency: number;
  rounds: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

export async function runStore(o: StoreOptions): Promise<void> {
  const z = 12;
  const [x0, y0] = [2100, 1400];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + o.side - 1, y0 + o.side - 1);
  const total = o.side * o.side;
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-store-'));
  const server = await startServer(o.latency);
  const s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(work, 's3'), bucket: 'bench' });
  Object.assign(process.env, s3.env);
  resetS3Client();
  const temporal = await startEmbeddedServer({ dbFile: path.join(work, 'temporal.sqlite') });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: temporal.namespace });
  const nativeConnection = await NativeConnection.connect({ address: temporal.address });
  const taskQueue = 'bench-store';
  const worker = await createWorker({
    connection: nativeConnection,
    client,
    namespace: temporal.namespace,
    taskQueue,
    roots: { sources: [work], outputs: [work], buckets: ['s3://bench/runs'] },
  });
  const running = worker.run();
  console.log(
    `bench:throughput --store s3: ${o.side} x ${o.side} = ${total} tiles of 256 px, ${o.concurrency} requests per batch x ${o.batches} batches in flight, batches of ${o.batchSize}, server latency ${o.latency} ms; S3: Versity S3 Gateway on ${s3.endpoint}`,
  );
  const request = (output: string): MosaicRequest => ({
    source: { type: 'xyz', url: `${server.url}/{z}/{x}/{y}.png`, concurrency: o.concurrency },
    sourceName: 'bench',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: z,
    output,
    batchSize: o.batchSize,
    parallelBatches: o.batches,
    maxTiles: total,
  });
  const runs: Record<'local' | 's3', number[]> = { local: [], s3: [] };
  try {
    for (let round = 1; round <= o.rounds; round++) {
      for (const store of ['local', 's3'] as const) {
        const output =
          store === 'local' ? path.join(work, `r${round}`, 'mosaic.tif') : `s3://bench/runs/r${round}/mosaic.tif`;
        const id = `bench-store-${store}-${round}-${Date.now()}`;
        const t0 = performance.now();
        const result = await (await startMosaic(client, taskQueue, request(output), id)).result();
        const s = (performance.now() - t0) / 1000;
        if (result.counts.ok !== total)
          throw new Error(`bench:throughput: the ${store} run got ${result.counts.ok}/${total} tiles ok`);
        const [from, to] = fetchPhase((await client.workflow.getHandle(id).fetchHistory()).events ?? []);
        runs[store].push(total / s);
        console.log(
          `  ${store.padEnd(5)} (round ${round}) ${s.toFixed(1)} s (${(total / s).toFixed(1)} tiles/s): fetch ${((to - from) / 1000).toFixed(1)} s, the rest (plan, assembly and upload) ${(s - (to - from) / 1000).toFixed(1)} s`,
        );
      }
    }
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await nativeConnection.close();
    await temporal.stop();
    await s3.stop();
    server.stop();
    rmSync(work, { recursive: true, force: true });
  }
  const local = median(runs.local);
  const s3Rate = median(runs.s3);
  const ratio = s3Rate / local;
  console.log(`targets: s3 at least 0.8 of local: ${ratio >= 0.8 ? 'met' : 'MISSED'}`);
  console.log(`store: local=${local.toFixed(1)} s3=${s3Rate.toFixed(1)} ratio=${ratio.toFixed(3)} store=s3`);
}
