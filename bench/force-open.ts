/**
 * bench:force-open: how soon a fleet stops sending requests once an operator forces a breaker open from the
 * keyboard (the targets: a force-open stops the fleet's requests within a second of being applied, and within
 * two seconds of the command being started).
 *
 * A dev server, --workers worker processes (each a real tilebreaker worker with its own breaker guard) and one
 * large `wait` mosaic against a local tile server with --latency ms a tile. Once traffic flows, the bench runs
 * the built CLI as an operator would, `tilebreaker breaker open KEY --for 10m` (a new node process, started
 * while the fleet fetches), reads the instant the entity applied it (the transition's `at`, the workflow
 * clock), and counts the requests the tile server received after that instant; then resets the breaker, waits
 * for the waiting mosaic to resume, and repeats --opens times. Prints one line per open, then exactly:
 *   force-open: workers=<n> opens=<n> stop-ms=<int> requests-after=<int> applied-ms=<int> command-ms=<int>
 * stop-ms: the latest request start after the force-open took effect, over every open (0: none came after);
 * requests-after: the most requests started after it in one open; applied-ms: the longest time from the CLI
 * sending the signal to the entity applying it; command-ms: the longest time from starting the command (just
 * before the process is spawned) to the last request the tile server received (0: none came after the start).
 * Targets: stop-ms <= 1000, command-ms <= 2000.
 */
import { execFile, fork, type ChildProcess } from 'node:child_process';
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
import { adminBreaker, breakerTransitions, type AdminResult } from '../src/client/breakers';
import { startEmbeddedServer } from '../src/client/embedded-server';
import { startMosaic } from '../src/client/mosaics';
import { tileBounds } from '../src/geo/mercator';

/** The built CLI beside this bench's build: what `tilebreaker` runs. */
const CLI = path.join(__dirname, '..', 'src', 'cli', 'main.js');

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
    setTimeout(
      () => res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png),
      latencyMs,
    );
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, arrivals, close: () => server.close() };
}

async function startWorker(address: string, namespace: string, taskQueue: string, work: string): Promise<ChildProcess> {
  const child = fork(path.join(__dirname, 'force-open', 'worker-child.js'), [address, namespace, taskQueue, work], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`worker process exited (${code})`)));
  });
  return child;
}

/** Runs the CLI to completion: its exit code and output. */
function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env, timeout: 120_000 }, (err, out, stderr) => {
      const code = err
        ? typeof (err as { code?: unknown }).code === 'number'
          ? (err as { code: number }).code
          : 1
        : 0;
      resolve({ code, out: String(out), err: String(stderr) });
    });
  });
}

/** Resolves once no request has arrived for `quietMs` (at most `timeoutMs`): the fleet has stopped. */
async function untilQuiet(arrivals: number[], quietMs: number, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end && Date.now() - (arrivals.at(-1) ?? 0) < quietMs) await sleep(50);
}

/** Resolves once `n` more requests have arrived (or throws after `timeoutMs`). */
async function untilRequests(arrivals: number[], n: number, timeoutMs: number): Promise<void> {
  const target = arrivals.length + n;
  const end = Date.now() + timeoutMs;
  while (arrivals.length < target) {
    if (Date.now() > end)
      throw new Error(`only ${arrivals.length - (target - n)} of ${n} requests arrived within ${timeoutMs} ms`);
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
  const client = new Client({
    connection: await Connection.connect({ address: temporal.address }),
    namespace: temporal.namespace,
  });
  try {
    for (let i = 0; i < workers; i++)
      children.push(await startWorker(temporal.address, temporal.namespace, taskQueue, work));
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
    console.log(
      `bench:force-open: ${workers} worker processes, one 'wait' mosaic of ${side * side} tiles, concurrency ${o.concurrency} per worker, tile latency ${o.latency} ms; breaker ${key}`,
    );
    let stopMs = 0;
    let requestsAfter = 0;
    let appliedMs = 0;
    let commandMs = 0;
    const cliEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: temporal.namespace,
      TILEBREAKER_TASK_QUEUE: taskQueue,
    };
    for (let k = 1; k <= opens; k++) {
      await untilRequests(tiles.arrivals, 150, 120_000);
      const started = Date.now();
      const cli = await runCli(
        ['breaker', 'open', key, '--for', '10m', '--reason', 'bench:force-open', '--actor', 'bench', '--json'],
        cliEnv,
      );
      const exited = Date.now();
      if (cli.code !== 0 && cli.code !== 5)
        throw new Error(`force-open ${k}: tilebreaker breaker open exited ${cli.code}: ${cli.err.trim()}`);
      // Exit 5: sent, not yet confirmed; the transition is read once the entity has applied it.
      const r = JSON.parse(cli.out) as Partial<AdminResult> & { sentAt: number };
      const transition =
        r.transition ??
        (await breakerTransitions(client, key, { limit: 5 })).find(
          (t) => t.reason === 'forced-open' && t.actor === 'bench' && t.at >= r.sentAt - 30_000,
        );
      if (!transition) throw new Error(`force-open ${k}: no transition recorded (exit ${cli.code})`);
      const at = transition.at;
      // Requests that were already on their way when the signal landed finish; none may start afterwards.
      await sleep(3_000);
      await untilQuiet(tiles.arrivals, 1_500, 30_000);
      const after = tiles.arrivals.filter((t) => t > at);
      const last = after.length ? Math.max(...after) - at : 0;
      const command = Math.max(0, (tiles.arrivals.at(-1) ?? 0) - started);
      console.log(
        `  open ${k}: the command ran ${exited - started} ms (exit ${cli.code}), its signal applied ${at - r.sentAt} ms after it was sent; ` +
          `${after.length} requests started after that, the last ${last} ms after; the last request ${command} ms after the command's start`,
      );
      stopMs = Math.max(stopMs, last);
      requestsAfter = Math.max(requestsAfter, after.length);
      appliedMs = Math.max(appliedMs, at - r.sentAt);
      commandMs = Math.max(commandMs, command);
      await adminBreaker(client, key, 'reset', { reason: 'bench:force-open', actor: 'bench' });
    }
    await handle.cancel();
    console.log(
      `force-open: workers=${workers} opens=${opens} stop-ms=${stopMs} requests-after=${requestsAfter} applied-ms=${appliedMs} command-ms=${commandMs}`,
    );
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
