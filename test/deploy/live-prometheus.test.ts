import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { breakerKey, type TransitionRecord } from '../../src/breaker';
import { breakerTransitions } from '../../src/client/breakers';
import { localBinaries } from '../../src/client/local-server';
import { startMosaic } from '../../src/client/mosaics';
import { untilServerReady } from '../../src/client/server-wait';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { isClose, isOpenState, isTrip } from '../../src/workflows/breaker-entity/metrics';
import { freePort } from '../helpers/mapserver';
import { demoRequest } from '../helpers/mosaic';
import { prometheusAvailable, startPrometheus, type Prometheus } from '../helpers/prometheus';

const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
// .ci/run installs Debian's prometheus: in CI a missing binary fails the test instead of skipping it.
const skip =
  prometheusAvailable() || process.env['CI'] ? false : "prometheus is not installed (Debian's prometheus package)";

const opensIn = (log: TransitionRecord[]) =>
  log.filter((t) => !t.shadow && isOpenState(t.to) && !isOpenState(t.from)).length;
/** Time in open or forced-open over closed stretches of the log, in ms. */
function openMsIn(log: TransitionRecord[]): number {
  const ordered = [...log].filter((t) => !t.shadow).sort((a, b) => a.at - b.at);
  let ms = 0;
  for (let i = 0; i < ordered.length - 1; i++)
    if (isOpenState(ordered[i]!.to)) ms += ordered[i + 1]!.at - ordered[i]!.at;
  return ms;
}

async function until<T>(read: () => Promise<T>, pred: (v: T) => boolean, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (pred(v)) return v;
    if (Date.now() > end) throw new Error(`${what}: still ${JSON.stringify(v)} after ${ms} ms`);
    await delay(250);
  }
}

test(
  'a real Prometheus scraping a worker: the opens and the open time the entity recorded (and the fail-open alert when Temporal goes away)',
  { skip, timeout: 300_000 },
  async (t) => {
    const bins = localBinaries();
    if (!bins.cli) return t.skip('no Temporal CLI (scripts/setup-temporal.sh)');
    const dir = mkdtempSync(path.join(tmpdir(), 'tb-live-prom-'));
    const port = await freePort();
    const metricsPort = await freePort();
    const namespace = `live-prom-${process.pid}`;
    const taskQueue = 'tilebreaker';
    writeFileSync(
      path.join(dir, 'breaker.json'),
      JSON.stringify({ minSamples: 6, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 0 }),
    );
    const tiles = await startDemoTileServer({ latencyMs: 20 });
    const server = spawn(
      bins.cli,
      [
        'server',
        'start-dev',
        '--headless',
        '--ip',
        '127.0.0.1',
        '--port',
        String(port),
        '--namespace',
        namespace,
        '--log-level',
        'error',
      ],
      {
        stdio: 'ignore',
      },
    );
    let worker: ChildProcess | undefined;
    let prometheus: Prometheus | undefined;
    let connection: Connection | undefined;
    let stderr = '';
    try {
      worker = spawn(
        process.execPath,
        [
          cli,
          'worker',
          '--metrics-addr',
          `127.0.0.1:${metricsPort}`,
          '--breaker-config',
          path.join(dir, 'breaker.json'),
          '--output-dir',
          dir,
        ],
        {
          env: {
            ...process.env,
            TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
            TEMPORAL_NAMESPACE: namespace,
            TILEBREAKER_TASK_QUEUE: taskQueue,
            TILEBREAKER_LOG_LEVEL: 'WARN',
          },
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      worker.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
      prometheus = await startPrometheus([`127.0.0.1:${metricsPort}`]);
      connection = await untilServerReady(() => Connection.connect({ address: `127.0.0.1:${port}` }), {
        say: () => {},
        what: 'the test server',
      });
      const client = new Client({ connection, namespace });
      const key = breakerKey(tiles.url);
      const p = prometheus;
      await until(
        () => p.query('up{job="tilebreaker-workers"}'),
        (v) => v.length === 1 && v[0]!.value === 1,
        90_000,
        'Prometheus scrapes the worker',
      );
      const opensQuery = `sum(tilebreaker_circuit_open_total{endpoint="${key}"})`;
      assert.deepEqual(await p.query(opensQuery), [], 'no open counted before the outage');

      // The tile server goes down after 30 requests for 6 s: the breaker opens, probes fail, it closes again.
      tiles.scheduleOutage(30, 6_000);
      const handle = await startMosaic(client, taskQueue, demoRequest(tiles, dir, 'live', { fallback: 'fail-fast' }));
      await handle.result();
      const log = await until(
        () => breakerTransitions(client, key),
        (l) => l.some((x) => x.reason === 'probes-succeeded') || opensIn(l) > 0,
        30_000,
        'the entity recorded the outage',
      );
      assert.ok(opensIn(log) >= 1, JSON.stringify(log));
      // What Prometheus holds catches up with the entity's log within a few scrapes (the log may still move).
      let opens: number | undefined;
      let entityLog: TransitionRecord[] = log;
      await until(
        async () => {
          entityLog = await breakerTransitions(client, key);
          opens = (await p.query(opensQuery))[0]?.value;
          return opens;
        },
        (v) => v === opensIn(entityLog),
        30_000,
        `Prometheus' count of opens against the entity's ${opensIn(entityLog)}`,
      );
      t.diagnostic(
        `opens: Prometheus ${opens}, entity ${opensIn(entityLog)} (${entityLog.map((x) => `${x.from}->${x.to}`).join(', ')})`,
      );
      // The open time: whole seconds per open stretch, so within a second per stretch of the entity's log.
      // The series exists from the entity run's start (set to 0), so an absent one is a failure, not 0 s.
      const openSeries = await p.query(`sum(tilebreaker_breaker_open_seconds_total{endpoint="${key}"})`);
      assert.equal(openSeries.length, 1, 'Prometheus holds the open-seconds counter');
      const openS = openSeries[0]!.value;
      const entityOpenS = openMsIn(entityLog) / 1000;
      t.diagnostic(`open seconds: Prometheus ${openS}, entity log ${entityOpenS.toFixed(3)}`);
      assert.ok(
        openS <= entityOpenS + 0.001 && openS >= entityOpenS - opensIn(entityLog) - 1,
        `${openS} s against the entity's ${entityOpenS} s`,
      );
      // Trips and closes, the open/closed cycles the flapping alert counts: as the entity's log has them (its failed
      // probes, if any, are opens, not trips). Read again with the log, which a late cooldown may still move.
      await until(
        async () => {
          entityLog = await breakerTransitions(client, key);
          const [trips, closes] = await Promise.all(
            ['trips', 'closes'].map((c) => p.query(`sum(tilebreaker_circuit_${c}_total{endpoint="${key}"})`)),
          );
          return [
            trips![0]?.value,
            closes![0]?.value,
            entityLog.filter(isTrip).length,
            entityLog.filter(isClose).length,
          ];
        },
        ([trips, closes, logTrips, logCloses]) => trips === logTrips && closes === logCloses && logTrips! >= 1,
        30_000,
        "Prometheus' trips and closes against the entity's",
      );

      // Temporal goes away while a mosaic fetches: the batches already running go on (nothing new is dispatched
      // without the server), their guard fails open, and the alert goes pending. The batches are large, so some
      // are still fetching when the server dies (with the helper's 16 tiles they all end within a second).
      await t.test('the fail-open alert when the Temporal server is stopped mid-fetch', async () => {
        const before = tiles.stats.requests;
        const big = await startMosaic(
          client,
          taskQueue,
          demoRequest(tiles, dir, 'live-big', {
            zoom: 10,
            maxTiles: 20_000,
            batchSize: 1_024,
            fallback: 'wait',
            deadline: '1h',
          }),
        );
        await until(
          () => Promise.resolve(tiles.stats.requests - before),
          (n) => n > 100,
          90_000,
          'the second mosaic fetches',
        ).catch(async (err: unknown) => {
          const d = await big.describe();
          throw new Error(
            `${(err as Error).message}; the mosaic is ${d.status.name}; breaker log ${JSON.stringify(await breakerTransitions(client, key))}`,
          );
        });
        server.kill('SIGKILL');
        const alert = await until(
          () => p.alerts(),
          (a) => a.some((x) => x.labels['alertname'] === 'TilebreakerGuardFailOpen' && x.labels['endpoint'] === key),
          60_000,
          'the fail-open alert',
        ).catch(async (err: unknown) => {
          const fo = await p.query('tilebreaker_guard_fail_open_total');
          const raw = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(
            (r) => r.text(),
            (e: Error) => e.message,
          );
          throw new Error(
            `${(err as Error).message}; fail-open series ${JSON.stringify(fo)}; requests since ${tiles.stats.requests - before}; scrape: ${raw
              .split('\n')
              .filter((l) => l.includes('fail_open'))
              .join(' | ')}; worker: ${stderr.slice(-1500)}`,
          );
        });
        const failOpen = alert.find((x) => x.labels['alertname'] === 'TilebreakerGuardFailOpen')!;
        t.diagnostic(`alert ${failOpen.labels['alertname']} ${failOpen.state} for ${key}`);
        assert.ok(['pending', 'firing'].includes(failOpen.state));
        assert.ok(((await p.query(`sum(tilebreaker_guard_fail_open_total{endpoint="${key}"})`))[0]?.value ?? 0) > 0);
        // The worker's own polls fail too (the SDK's counter): the alert that stays once no call is left in flight.
        const polls = await until(
          () => p.alerts(),
          (a) =>
            a.some(
              (x) => x.labels['alertname'] === 'TilebreakerTemporalUnreachable' && x.labels['namespace'] === namespace,
            ),
          60_000,
          'the Temporal-unreachable alert',
        );
        const unreachable = polls.find((x) => x.labels['alertname'] === 'TilebreakerTemporalUnreachable')!;
        t.diagnostic(
          `alert ${unreachable.labels['alertname']} ${unreachable.state} for ${unreachable.labels['instance']}`,
        );
        assert.ok(['pending', 'firing'].includes(unreachable.state));
      });
    } finally {
      await connection?.close().catch(() => undefined);
      if (worker && worker.exitCode === null) {
        worker.kill('SIGKILL');
        await once(worker, 'exit');
      }
      if (server.exitCode === null && server.signalCode === null) {
        server.kill('SIGKILL');
        await once(server, 'exit');
      }
      await prometheus?.stop();
      await tiles.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
