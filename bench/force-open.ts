/**
 * bench:force-open: how soon a fleet stops sending requests once an operator forces a breaker open
 * (the target: a force-open stops the fleet's requests within a second).
 *
 * A dev server, --workers worker processes (each a real tilebreaker worker with its own breaker guard) and one
 * large `wait` mosaic against a local tile server with --latency ms a tile. Once traffic flows, the bench
 * forces the breaker open (`adminBreaker`, what `tilebreaker breaker open` calls), reads the instant the entity
 * applied it (the transition's `at`, the workflow clock), and counts the requests the tile server received
 * after that instant; then resets the breaker, waits for the waiting mosaic to resume, and repeats --opens
 * times. Prints one line per open, then exactly:
 *   force-open: workers=<n> opens=<n> stop-ms=<int> requests-after=<int> applied-ms=<int>
 * stop-ms: the latest request start after the force-open took effect, over every open (0: none came after);
 * requests-after: the most requests started after it in one open; applied-ms: the longest time from sending the
 * signal to the entity applying it. Target: stop-ms <= 1000.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { Command } from 'commander';
import sharp from 'sharp';
import { breakerKey } from '../src/breaker';
import { adminBreaker } from '../src/client/breakers';
import { startEmbeddedServer } from '../src/client/embedded-server';
import { startMosaic } from '../src/client/mosaics';
import { tileBounds } from '../src/geo/mercator';

interface Opts {
  workers: string;
  opens: string;
  latency: string;
  concurrency: string;
}

/** A tile server that answers every tile after `latencyMs` and records when each request arrived. */
async function startTileServer(latencyMs: number): Promise<{ url: string; arrivals: number[]; close: () => void }> {
  const png = await sharp({ create: { width: 256, height: 256, channels: 3, background: '#aad3df' } })
    .png()
    .toBuffer();
  const arrivals: number[] = [];
  const server = createServer((req, res) => {
    arrivals.push(Date.now());
    setTimeout(() => res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png), latencyMs);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, arrivals, close: () => server.close() };
}

async function startWorker(address: string, namespace: string, taskQueue: string, work: string): Promise<ChildProcess> {
  const child = fork(path.join(__dirname, 'force-open', 'worker-child.js'), [address, namespace, taskQueue, work], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`worker process exited (${code})`)));
  });
  return child;
}

/** Resolves once `n` more requests have arrived (or throws after `timeoutMs`). */
async function untilRequests(arrivals: number[], n: number, timeoutMs: number): Promise<void> {
  const target = arrivals.length + n;
  const end = Date.now() + timeoutMs;
  while (arrivals.length < target) {
    if (Date.now() > end) throw new Error(`only ${arrivals.length - (target - n)} of ${n} requests arrived within ${timeoutMs} ms`);
    await sleep(20);
  }
}

async function main(o: Opts): Promise<void> {
  const workers = Number(o.workers);
  const opens = Number(o.opens);
  const tiles = await startTileServer(Number(o.latency));
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-force-open-'));
  const temporal = await startEmbeddedServer({ dbFile: path.join(work, 'temporal.sqlite') });
  const taskQueue = 'bench-force-open';
  const children: ChildProcess[] = [];
  const client = new Client({ connection: await Connection.connect({ address: temporal.address }), namespace: temporal.namespace });
  try {
    for (let i = 0; i < workers; i++) children.push(await startWorker(temporal.address, temporal.namespace, taskQueue, work));
    const side = 128;
    const [z, x0, y0] = [12, 1900, 1300];
    const nw = tileBounds(z, x0, y0);
    const se = tileBounds(z, x0 + side - 1, y0 + side - 1);
    const template = `${tiles.url}/{z}/{x}/{y}.png`;
    const handle = await startMosaic(client, taskQueue, {
      source: { type: 'xyz', url: template, concurrency: Number(o.concurrency) },
      sourceName: 'bench',
      bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
      crs: 'EPSG:3857',
      zoom: z,
      output: path.join(work, 'force-open.tif'),
      maxTiles: 2 * side * side,
      parallelBatches: 2 * workers,
      fallback: 'wait',
      deadline: '30m',
    });
    const key = breakerKey(template);
    console.log(`bench:force-open: ${workers} worker processes, one 'wait' mosaic of ${side * side} tiles, concurrency ${o.concurrency} per worker, tile latency ${o.latency} ms; breaker ${key}`);
    let stopMs = 0;
    let requestsAfter = 0;
    let appliedMs = 0;
    for (let k = 1; k <= opens; k++) {
      await untilRequests(tiles.arrivals, 150, 120_000);
      const sent = Date.now();
      const r = await adminBreaker(client, key, 'force-open', { reason: 'bench:force-open', actor: 'bench' });
      if (!r.transition) throw new Error(`force-open ${k}: no transition recorded (state ${r.status.view.state})`);
      const at = r.transition.at;
      // Requests that were already on their way when the signal landed finish; none may start afterwards.
      await sleep(3_000);
      const after = tiles.arrivals.filter((t) => t > at);
      const last = after.length ? Math.max(...after) - at : 0;
      console.log(`  open ${k}: applied ${at - sent} ms after the signal was sent (confirmed ${r.confirmed}); ${after.length} requests started after it, the last ${last} ms after`);
      stopMs = Math.max(stopMs, last);
      requestsAfter = Math.max(requestsAfter, after.length);
      appliedMs = Math.max(appliedMs, at - sent);
      await adminBreaker(client, key, 'reset', { reason: 'bench:force-open', actor: 'bench' });
    }
    await handle.cancel();
    console.log(`force-open: workers=${workers} opens=${opens} stop-ms=${stopMs} requests-after=${requestsAfter} applied-ms=${appliedMs}`);
  } finally {
    for (const c of children) c.disconnect();
    await Promise.all(children.filter((c) => c.exitCode === null).map((c) => once(c, 'exit')));
    await temporal.stop();
    tiles.close();
    rmSync(work, { recursive: true, force: true });
  }
}

const program = new Command('bench:force-open')
  .option('--workers <n>', 'worker processes', '3')
  .option('--opens <n>', 'force-opens to measure', '3')
  .option('--latency <ms>', 'tile server latency', '50')
  .option('--concurrency <n>', "the source's concurrency (per worker process)", '4')
  .action(async (o: Opts) => main(o));
void program.parseAsync().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
