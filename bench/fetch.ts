/**
 * bench:fetch: fetch-and-validate throughput against a plain undici loop doing the same requests, side by
 * side in one run, at the same concurrency, from a local tile server in a child process.
 *
 *   plain      undici request + read the body (no validation)
 *   validated  tilebreaker's fetchUrl + classify: magic bytes, full sharp decode (failOn truncated), size, blank
 *   activity   the whole fetch activity per batch: the above plus the tile store (atomic writes + metadata)
 *
 * Modes alternate in rounds so drift on a shared machine hits them alike; the medians are compared.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { Agent, request } from 'undici';
import { makeFetchBatch } from '../src/activities/fetch/fetch-batch';
import { EndpointPools } from '../src/activities/http/endpoint-pool';
import { fetchUrl } from '../src/activities/http/fetch-url';
import { classify } from '../src/activities/validate/classify';
import { parseSource } from '../src/sources/schema';
import { adopt, endOnSignals } from '../src/demo/children';

interface Opts {
  tiles: string;
  concurrency: string;
  rounds: string;
  latency: string;
}

async function startServer(latencyMs: number): Promise<{ url: string; bytes: number; stop: () => void }> {
  const child = adopt(
    fork(path.join(__dirname, 'fetch', 'server-child.js'), [String(latencyMs)], {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    }),
  );
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (code) => reject(new Error(`tile server exited (${code})`)));
  });
  const [port, bytes] = line.split(' ').map(Number);
  return { url: `http://127.0.0.1:${port}`, bytes: bytes!, stop: () => child.kill() };
}

async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < n; i = next++) await fn(i);
    }),
  );
  return (n / (performance.now() - started)) * 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(opts: Opts): Promise<void> {
  const n = Number(opts.tiles);
  const concurrency = Number(opts.concurrency);
  const rounds = Number(opts.rounds);
  const latencyMs = Number(opts.latency);
  const server = await startServer(latencyMs);
  const url = (i: number) => `${server.url}/12/${i}/${i % 4096}.png`;
  const source = parseSource({ type: 'xyz', url: `${server.url}/{z}/{x}/{y}.png`, concurrency });
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 30_000 });
  const pools = new EndpointPools();
  const dispatcher = pools.for(source);
  const fetchTiles = makeFetchBatch({ pools });
  const store = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-fetch-'));
  const expected = { width: 256, height: 256, blankIsFailure: false };
  let bad = 0;

  const modes = {
    plain: () =>
      pool(n, concurrency, async (i) => {
        const res = await request(url(i), { dispatcher: agent });
        await res.body.arrayBuffer();
      }),
    validated: () =>
      pool(n, concurrency, async (i) => {
        const v = await classify(await fetchUrl(url(i), { dispatcher, headers: {} }), expected);
        if (v.kind !== 'success') bad++;
      }),
    activity: async () => {
      const started = performance.now();
      const tiles = Array.from({ length: n }, (_, i) => ({ z: 12, x: i % 4096, y: Math.floor(i / 4096) }));
      const batch = 256;
      for (let b = 0; b < n; b += batch) {
        const results = await fetchTiles({
          sourceName: 'bench',
          source,
          tiles: tiles.slice(b, b + batch),
          storeRoot: store,
          breaker: false,
        });
        bad += results.filter((r) => r.status !== 'ok').length;
      }
      return (n / (performance.now() - started)) * 1000;
    },
  };
  type Mode = keyof typeof modes;
  const figures: Record<Mode, number[]> = { plain: [], validated: [], activity: [] };
  // Warm up connections, sharp and the JIT once, unmeasured.
  for (const m of Object.keys(modes) as Mode[]) await modes[m]();
  for (let r = 0; r < rounds; r++) {
    for (const m of Object.keys(modes) as Mode[]) figures[m].push(await modes[m]());
  }
  server.stop();
  await agent.close();
  await pools.close();
  rmSync(store, { recursive: true, force: true });

  const plain = median(figures.plain);
  const validated = median(figures.validated);
  const activity = median(figures.activity);
  console.log(
    `bench:fetch: ${n} tiles of ${server.bytes} bytes (256 px PNG) per round, concurrency ${concurrency}, server latency ${latencyMs} ms, ${rounds} rounds, medians`,
  );
  for (const m of Object.keys(modes) as Mode[]) {
    console.log(
      `  ${m.padEnd(10)} ${median(figures[m]).toFixed(0).padStart(6)} tiles/s   rounds: ${figures[m].map((x) => x.toFixed(0)).join(' ')}`,
    );
  }
  console.log(`  invalid results: ${bad} (must be 0)`);
  const cost = 1 - validated / plain;
  console.log(
    `fetch: validated=${validated.toFixed(0)} plain=${plain.toFixed(0)} ratio=${(validated / plain).toFixed(3)} validation-cost=${(cost * 100).toFixed(1)}% activity=${activity.toFixed(0)}`,
  );
  console.log(
    `target: validation costs at most 15% of throughput at concurrency 32: ${cost <= 0.15 ? 'met' : 'MISSED'}`,
  );
  if (bad) process.exitCode = 1;
}

// Its tile server ends with it.
endOnSignals(() => Promise.resolve());
new Command('bench:fetch')
  .description('fetch-and-validate throughput vs a plain undici loop, one run, same concurrency')
  .option('--tiles <n>', 'tiles per round', '2000')
  .option('--concurrency <n>', 'requests in flight', '32')
  .option('--rounds <n>', 'measured rounds per mode (alternating)', '5')
  .option('--latency <ms>', 'tile server render time per tile (0: answers at once, the pure CPU cost)', '0')
  .action((opts: Opts) => main(opts))
  .parseAsync()
  .catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
