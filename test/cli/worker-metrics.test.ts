import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { Runtime } from '@temporalio/worker';
import { breakerKey, type BreakerStateName, type TransitionRecord } from '../../src/breaker';
import { breakerTransitions } from '../../src/client/breakers';
import { startMosaic, startRedrive } from '../../src/client/mosaics';
import { localBinaries } from '../../src/client/local-server';
import { untilServerReady } from '../../src/client/server-wait';
import { parseMetricsAddr, REQUEST_DURATION_BUCKETS } from '../../src/client/telemetry';
import { fallbackTier, mosaicFinish } from '../../src/activities/metrics/mosaic-metrics';
import { NO_METRICS, WorkerMetrics } from '../../src/activities/metrics/worker-metrics';
import {
  EntityMetrics,
  isClose,
  isOpenState,
  isTrip,
  type EntityMetricSink,
} from '../../src/workflows/breaker-entity/metrics';
import { startDemoTileServer } from '../../src/demo/tile-server';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { freePort } from '../helpers/mapserver';
import { demoRequest } from '../helpers/mosaic';

const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const T0 = Date.UTC(2001, 0, 2, 3, 4, 5);

test('--metrics-addr and TILEBREAKER_METRICS_ADDR: IP:PORT, or a clear error naming where the value came from', () => {
  assert.deepEqual(parseMetricsAddr('127.0.0.1:9464', '--metrics-addr'), {
    host: '127.0.0.1',
    port: 9464,
    bindAddress: '127.0.0.1:9464',
  });
  assert.deepEqual(parseMetricsAddr('[::1]:9464', '--metrics-addr'), {
    host: '::1',
    port: 9464,
    bindAddress: '[::1]:9464',
  });
  assert.throws(
    () => parseMetricsAddr('9464', '--metrics-addr'),
    /^Error: --metrics-addr "9464": not HOST:PORT; give IP:PORT/,
  );
  assert.throws(
    () => parseMetricsAddr('localhost:9464', 'TILEBREAKER_METRICS_ADDR'),
    /TILEBREAKER_METRICS_ADDR "localhost:9464": "localhost" is not an IP address/,
  );
  assert.throws(
    () => parseMetricsAddr('127.0.0.1:0', '--metrics-addr'),
    /--metrics-addr "127.0.0.1:0": port 0 is not between 1 and 65535/,
  );
  assert.throws(() => parseMetricsAddr('127.0.0.1:70000', '--metrics-addr'), /port 70000/);
  assert.throws(() => parseMetricsAddr('::1:9464', '--metrics-addr'), /not HOST:PORT/);
});

test('the worker refuses a bad metrics address before it connects anywhere (exit 2, the flag or variable and the value named)', () => {
  const env = { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' };
  const flag = spawnSync(process.execPath, [cli, 'worker', '--metrics-addr', 'metrics.example:9464'], {
    env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(flag.status, 2, flag.stderr);
  assert.match(
    flag.stderr,
    /^tilebreaker: --metrics-addr "metrics.example:9464": "metrics.example" is not an IP address/m,
  );
  const fromEnv = spawnSync(process.execPath, [cli, 'worker'], {
    env: { ...env, TILEBREAKER_METRICS_ADDR: '127.0.0.1' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(fromEnv.status, 2, fromEnv.stderr);
  assert.match(fromEnv.stderr, /^tilebreaker: TILEBREAKER_METRICS_ADDR "127.0.0.1": not HOST:PORT/m);
});

/** A sink that remembers what the entity counted, as Prometheus would sum it. */
function recordingSink(): EntityMetricSink & {
  totals: Map<string, number>;
  get(name: string, labels: Record<string, string>): number;
} {
  const totals = new Map<string, number>();
  const id = (name: string, labels: Record<string, string>) =>
    `${name}${JSON.stringify(Object.entries(labels).sort())}`;
  return {
    totals,
    count(name, value, labels) {
      assert.ok(Number.isInteger(value) && value >= 0, `${name} got ${value}: the SDK's counters are integers`);
      totals.set(id(name, labels), (totals.get(id(name, labels)) ?? 0) + value);
    },
    get: (name, labels) => totals.get(id(name, labels)) ?? 0,
  };
}

const tr = (
  at: number,
  from: BreakerStateName,
  to: BreakerStateName,
  reason: TransitionRecord['reason'],
  extra: Partial<TransitionRecord> = {},
): TransitionRecord => ({
  at,
  from,
  to,
  reason,
  detail: '',
  ...extra,
});

test('entity counters: each open once with its reason, every transition, probes, and whole seconds open with the remainder carried', () => {
  const sink = recordingSink();
  const key = 'http://tiles.example.test:80';
  const m = new EntityMetrics(key, 'closed', [], null, T0, sink);
  m.zero();
  assert.equal(sink.get('tilebreaker_circuit_open', { endpoint: key, reason: 'forced' }), 0);
  assert.ok(
    sink.totals.has(
      `tilebreaker_circuit_open${JSON.stringify([
        ['endpoint', key],
        ['reason', 'latency'],
      ])}`,
    ),
    'series exist at 0 before the first open',
  );
  const apply = (
    t: TransitionRecord[],
    event: Parameters<EntityMetrics['applied']>[0] = { type: 'tick' },
    ignored?: string,
  ) => m.applied(event, { state: undefined as never, transitions: t, ...(ignored ? { ignored } : {}) });
  // Open 1.6 s, then a failed probe reopens for 2.7 s, then a force-open (from closed) for 0.4 s: 4.7 s in all.
  apply([tr(T0, 'closed', 'open', 'failure-ratio')]);
  apply([tr(T0 + 1_600, 'open', 'half-open', 'cooldown-elapsed')]);
  apply([tr(T0 + 1_700, 'half-open', 'open', 'probe-failed')], {
    type: 'probe-result',
    generation: 1,
    outcome: 'transient',
  });
  // An operator forcing open a breaker already open: no new open, and the open time runs on.
  apply([tr(T0 + 2_000, 'open', 'forced-open', 'forced-open')]);
  apply([tr(T0 + 4_400, 'forced-open', 'half-open', 'force-expired')]);
  apply([], { type: 'probe-result', generation: 2, outcome: 'success' });
  apply([tr(T0 + 4_500, 'half-open', 'closed', 'probes-succeeded')], {
    type: 'probe-result',
    generation: 3,
    outcome: 'success',
  });
  // A stale result changes nothing and counts nothing; a neutral one releases the token and counts nothing.
  apply([], { type: 'probe-result', generation: 1, outcome: 'success' }, 'stale');
  apply([], { type: 'probe-result', generation: 4, outcome: 'neutral' });
  apply([tr(T0 + 10_000, 'closed', 'forced-open', 'forced-open')]);
  apply([tr(T0 + 10_400, 'forced-open', 'closed', 'forced-close')]);
  // Metrics-only mode moves the phase in the shadow: nothing blocked, nothing counted.
  apply([tr(T0 + 11_000, 'closed', 'open', 'failure-ratio', { shadow: true })]);
  const open = (reason: string) => sink.get('tilebreaker_circuit_open', { endpoint: key, reason });
  assert.deepEqual(['failure-ratio', 'probe-failed', 'forced', 'latency'].map(open), [1, 1, 1, 0]);
  assert.equal(sink.get('tilebreaker_breaker_transitions', { endpoint: key, from: 'open', to: 'forced-open' }), 1);
  assert.equal(
    sink.get('tilebreaker_breaker_transitions', { endpoint: key, from: 'closed', to: 'open' }),
    1,
    'the shadow open is not counted',
  );
  // 1.6 s (1 counted, 0.6 carried) + 2.7 s (3.3: 3 counted, 0.3 carried) + 0.4 s (0.7: none) = 4 whole seconds of 4.7.
  assert.equal(sink.get('tilebreaker_breaker_open_seconds', { endpoint: key }), 4);
  assert.equal(sink.get('tilebreaker_probes', { endpoint: key, outcome: 'success' }), 2);
  assert.equal(sink.get('tilebreaker_probes', { endpoint: key, outcome: 'failure' }), 1);
  // Trips: only the rules opening a closed breaker (not the failed probe, not the operator's force-open, not
  // the shadow). Closes: refusing -> letting through, by the probes and by the operator's force-close.
  const trips = (reason: string) => sink.get('tilebreaker_circuit_trips', { endpoint: key, reason });
  const closes = (reason: string) => sink.get('tilebreaker_circuit_closes', { endpoint: key, reason });
  assert.deepEqual(['failure-ratio', 'latency', 'slow-calls', 'permanent-surge'].map(trips), [1, 0, 0, 0]);
  assert.deepEqual(['probes-succeeded', 'forced-close', 'reset', 'disabled'].map(closes), [1, 1, 0, 0]);
});

test('one long outage trips once and closes once, however many probes fail; a flapping endpoint trips and closes each cycle', () => {
  const key = 'http://tiles.example.test:80';
  const outage = recordingSink();
  const m = new EntityMetrics(key, 'closed', [], null, T0, outage);
  m.zero();
  for (const [name, reason] of [
    ['tilebreaker_circuit_trips', 'failure-ratio'],
    ['tilebreaker_circuit_closes', 'probes-succeeded'],
  ] as const) {
    assert.ok(
      outage.totals.has(
        `${name}${JSON.stringify([
          ['endpoint', key],
          ['reason', reason],
        ])}`,
      ),
      `${name} exists at 0 before the first count`,
    );
  }
  const at = (t: TransitionRecord) => m.applied({ type: 'tick' }, { state: undefined as never, transitions: [t] });
  // 30 minutes down: a trip, a 30 s cooldown, then a failed probe every 5 s (360 of them), then 3 probes close it.
  let now = T0;
  at(tr(now, 'closed', 'open', 'failure-ratio'));
  now += 30_000;
  for (let i = 0; i < 360; i++) {
    at(tr(now, 'open', 'half-open', 'cooldown-elapsed'));
    m.applied(
      { type: 'probe-result', generation: i + 1, outcome: 'transient' },
      { state: undefined as never, transitions: [tr(now + 100, 'half-open', 'open', 'probe-failed')] },
    );
    now += 5_000;
  }
  at(tr(now, 'open', 'half-open', 'cooldown-elapsed'));
  at(tr(now + 300, 'half-open', 'closed', 'probes-succeeded'));
  assert.equal(
    outage.get('tilebreaker_circuit_open', { endpoint: key, reason: 'probe-failed' }),
    360,
    'every failed probe is an open',
  );
  assert.equal(outage.get('tilebreaker_probes', { endpoint: key, outcome: 'failure' }), 360);
  assert.deepEqual(
    [
      outage.get('tilebreaker_circuit_trips', { endpoint: key, reason: 'failure-ratio' }),
      outage.get('tilebreaker_circuit_closes', { endpoint: key, reason: 'probes-succeeded' }),
    ],
    [1, 1],
    'but one trip and one close',
  );

  const flapping = recordingSink();
  const f = new EntityMetrics(key, 'closed', [], null, T0, flapping);
  now = T0;
  for (let i = 0; i < 4; i++) {
    for (const t of [
      tr(now, 'closed', 'open', 'failure-ratio'),
      tr(now + 30_000, 'open', 'half-open', 'cooldown-elapsed'),
      tr(now + 31_000, 'half-open', 'closed', 'probes-succeeded'),
    ]) {
      f.applied({ type: 'tick' }, { state: undefined as never, transitions: [t] });
    }
    now += 120_000;
  }
  assert.deepEqual(
    [
      flapping.get('tilebreaker_circuit_trips', { endpoint: key, reason: 'failure-ratio' }),
      flapping.get('tilebreaker_circuit_closes', { endpoint: key, reason: 'probes-succeeded' }),
    ],
    [4, 4],
  );
});

test('a new run (continue-as-new) that starts open takes the open stretch from the carried log', () => {
  const sink = recordingSink();
  const key = 'http://tiles.example.test:80';
  // Most recent first: forced open at +5 s while open since +3 s.
  const log = [
    tr(T0 + 5_000, 'open', 'forced-open', 'forced-open'),
    tr(T0 + 3_000, 'closed', 'open', 'latency'),
    tr(T0, 'open', 'closed', 'probes-succeeded'),
  ];
  const m = new EntityMetrics(key, 'forced-open', log, null, T0 + 9_000, sink);
  m.applied(
    { type: 'tick' },
    { state: undefined as never, transitions: [tr(T0 + 12_500, 'forced-open', 'closed', 'forced-close')] },
  );
  assert.equal(sink.get('tilebreaker_breaker_open_seconds', { endpoint: key }), 9);
  assert.equal(
    sink.get('tilebreaker_circuit_open', { endpoint: key, reason: 'latency' }),
    0,
    'the open was counted by the run that made it',
  );
  assert.ok(isOpenState('forced-open') && !isOpenState('half-open'));
});

test('mosaic results and fallback tiers, as the metrics label them', () => {
  const tile = (status: 'ok' | 'stale' | 'hole' | 'dead-lettered' | 'failed', breakerState?: BreakerStateName) => ({
    i: 0,
    z: 1,
    x: 0,
    y: 0,
    status,
    reason: '',
    attempts: 1,
    pass: 0,
    ...(breakerState ? { breakerState } : {}),
  });
  const run = { partial: false, deadlineAt: null, now: T0 };
  assert.equal(
    mosaicFinish({ ...run, tiles: [tile('ok'), tile('stale'), tile('hole')] }),
    'complete',
    'stale tiles and 404 holes leave no gap',
  );
  assert.equal(mosaicFinish({ ...run, tiles: [tile('ok'), tile('hole', 'open')] }), 'gaps');
  assert.equal(mosaicFinish({ ...run, tiles: [tile('dead-lettered')] }), 'gaps');
  assert.equal(mosaicFinish({ ...run, deadlineAt: T0 - 1, tiles: [tile('ok')] }), 'deadline-missed');
  assert.equal(mosaicFinish({ ...run, partial: true, deadlineAt: T0 - 1, tiles: [tile('ok')] }), 'failed');
  assert.deepEqual(
    [
      fallbackTier('stale', undefined),
      fallbackTier('hole', 'open'),
      fallbackTier('hole', undefined),
      fallbackTier('dead-lettered', 'open'),
      fallbackTier('ok', undefined),
      fallbackTier('failed', undefined),
    ],
    ['stale', 'hole', null, 'dead-letter', null, null],
  );
});

test('with no telemetry installed the meters are no-ops: every call returns and nothing throws', () => {
  const all = (m: WorkerMetrics) => {
    m.request('demo', 'http://a:80', 'success', 0.25);
    m.notPermitted('http://a:80', 'open');
    m.failOpen('http://a:80');
    m.breakerState('http://a:80', 'half-open');
    m.breakerState('http://a:80', null);
    m.fallback('demo', 'http://a:80', 'stale', 3);
    m.mosaicFinished('/tmp/a.tif', 'gaps', { ok: 1, stale: 0, hole: 0, 'dead-lettered': 2, failed: 0, outside: 0 });
    m.deadLettersPending('/tmp/a.tif', 2);
  };
  all(NO_METRICS);
  // What a worker uses: the runtime's meter, here a runtime installed without telemetry (as in every test process).
  const meter: MetricMeter = Runtime.instance().metricMeter;
  assert.equal(meter, noopMetricMeter);
  all(new WorkerMetrics(() => Runtime.instance().metricMeter));
});

/** Prometheus' text format, the samples only: `name{labels} value`. */
function samples(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

const sum = (s: ReturnType<typeof samples>, name: string, match: Record<string, string> = {}) =>
  s
    .filter((x) => x.name === name && Object.entries(match).every(([k, v]) => x.labels[k] === v))
    .reduce((a, x) => a + x.value, 0);

/** Opens the entity recorded: transitions into open or forced open from outside them (not in the shadow). */
const opensIn = (log: TransitionRecord[]) =>
  log.filter((t) => !t.shadow && isOpenState(t.to) && !isOpenState(t.from)).length;

/** Whole seconds in the log's closed open stretches (what open_seconds_total adds, the remainder carried). */
function openSecondsIn(log: TransitionRecord[]): number {
  let ms = 0;
  let since: number | null = null;
  for (const t of [...log].reverse()) {
    if (t.shadow) continue;
    if (!isOpenState(t.from) && isOpenState(t.to)) since = t.at;
    else if (isOpenState(t.from) && !isOpenState(t.to) && since !== null) {
      ms += t.at - since;
      since = null;
    }
  }
  return Math.floor(ms / 1000);
}

test(
  'a worker with --metrics-addr serves the SDK metrics and tilebreaker_* on one endpoint; the open count is the entity log',
  { timeout: 240_000 },
  async (t) => {
    const bins = localBinaries();
    if (!bins.cli) return t.skip('no Temporal CLI (scripts/setup-temporal.sh)');
    const dir = mkdtempSync(path.join(tmpdir(), 'tb-metrics-'));
    const port = await freePort();
    const metricsPort = await freePort();
    const namespace = `metrics-${process.pid}`;
    const taskQueue = 'tilebreaker';
    // Trips on a handful of failures, cools down in a second: an outage of a few seconds shows several transitions.
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
      { stdio: 'ignore' },
    );
    let worker: ChildProcess | undefined;
    let stderr = '';
    let connection: Connection | undefined;
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
      worker.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const url = `http://127.0.0.1:${metricsPort}/metrics`;
      await until(
        () => stderr.includes(`metrics at ${url}`),
        90_000,
        () => stderr,
      );
      connection = await untilServerReady(() => Connection.connect({ address: `127.0.0.1:${port}` }), {
        say: () => {},
        what: 'the test server',
      });
      const client = new Client({ connection, namespace });
      // The tile server goes down after 30 requests for 6 s: the breaker opens, probes fail, it closes again.
      tiles.scheduleOutage(30, 6_000);
      const request = demoRequest(tiles, dir, 'metrics', { fallback: 'fail-fast' });
      const handle = await startMosaic(client, taskQueue, request);
      const result: MosaicResult = await handle.result();
      const key = breakerKey(tiles.url);
      const output = request.output;
      // The first run: fail-fast, so refused and failed tiles are dead letters, each counted once, as the manifest says.
      const first = samples(await (await fetch(url)).text());
      assert.ok(result.counts['dead-lettered'] > 0, JSON.stringify(result.counts));
      // Under the source's breaker key too: an endpoint's alerts join its own fallbacks.
      assert.equal(
        sum(first, 'tilebreaker_fallback_total', { source: 'demo', endpoint: key, tier: 'dead-letter' }),
        result.counts['dead-lettered'],
      );
      for (const [status, n] of Object.entries(result.counts))
        assert.equal(sum(first, 'tilebreaker_mosaic_tiles_total', { mosaic: output, status }), n, status);
      assert.equal(sum(first, 'tilebreaker_mosaics_finished_total', { result: 'gaps' }), 1);
      assert.equal(sum(first, 'tilebreaker_dead_letters_pending', { mosaic: output }), result.counts['dead-lettered']);
      // The outage's refusals: under open, or under half-open while one probe is out (which of the two a refusal
      // falls under is a race between the batches and the cooldown); never under closed.
      const refused = first.filter((x) => x.name === 'tilebreaker_not_permitted_total' && x.labels.endpoint === key);
      assert.ok(refused.reduce((a, x) => a + x.value, 0) > 0, JSON.stringify(refused));
      assert.deepEqual(
        refused.filter((x) => x.value > 0 && !['open', 'half-open'].includes(x.labels.state!)),
        [],
        'refused only while open or half-open',
      );

      // The re-drive, once the server is back: it waits for the breaker (a probe closes it) and clears the dead letters.
      await until(
        () => !tiles.isDown(),
        30_000,
        () => 'the tile server stays down',
      );
      const redrive = await startRedrive(client, taskQueue, result.manifest);
      const again = (await client.workflow.getHandle(redrive).result()) as MosaicResult;
      assert.equal(again.counts['dead-lettered'], 0, JSON.stringify(again.counts));

      // The entity may still move (a cooldown ending): read its log before and after the scrape, until they agree.
      let scrape = '';
      let log: TransitionRecord[] = [];
      const deadline = Date.now() + 30_000;
      for (;;) {
        const before = await breakerTransitions(client, key);
        scrape = await (await fetch(url)).text();
        log = await breakerTransitions(client, key);
        const s = samples(scrape);
        if (
          before.length === log.length &&
          sum(s, 'tilebreaker_circuit_open_total', { endpoint: key }) === opensIn(log)
        )
          break;
        if (Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      const s = samples(scrape);
      const excerpt = scrape
        .split('\n')
        .filter((l) => l.startsWith('tilebreaker_') && !l.includes('_bucket'))
        .join('\n');
      t.diagnostic(`scrape excerpt:\n${excerpt}`);
      assert.ok(opensIn(log) >= 1, `the outage opened the breaker: ${JSON.stringify(log)}`);
      assert.equal(
        sum(s, 'tilebreaker_circuit_open_total', { endpoint: key }),
        opensIn(log),
        `opens counted once each:\n${excerpt}\n${JSON.stringify(log)}`,
      );
      for (const reason of new Set(
        log.filter((x) => !x.shadow && isOpenState(x.to) && !isOpenState(x.from)).map((x) => x.reason),
      )) {
        const label = reason === 'forced-open' ? 'forced' : reason;
        assert.equal(
          sum(s, 'tilebreaker_circuit_open_total', { endpoint: key, reason: label }),
          log.filter((x) => !x.shadow && x.reason === reason && isOpenState(x.to) && !isOpenState(x.from)).length,
          label,
        );
      }
      assert.equal(
        sum(s, 'tilebreaker_breaker_transitions_total', { endpoint: key }),
        log.filter((x) => !x.shadow).length,
        excerpt,
      );
      // Trips and closes as the log has them: the outage tripped it (failed probes are opens, not trips), the probes closed it.
      assert.ok(log.some(isTrip) && log.some(isClose), JSON.stringify(log));
      assert.equal(sum(s, 'tilebreaker_circuit_trips_total', { endpoint: key }), log.filter(isTrip).length, excerpt);
      assert.equal(sum(s, 'tilebreaker_circuit_closes_total', { endpoint: key }), log.filter(isClose).length, excerpt);
      assert.equal(sum(s, 'tilebreaker_breaker_open_seconds_total', { endpoint: key }), openSecondsIn(log), excerpt);
      assert.ok(
        log.some((x) => x.reason === 'probes-succeeded'),
        JSON.stringify(log),
      );
      assert.ok(sum(s, 'tilebreaker_probes_total', { endpoint: key, outcome: 'success' }) >= 1, excerpt);
      // Every request the worker made is counted once with its classification: the tile server saw them all, the
      // pipeline's as requests and the entity's own half-open probes (sent through this worker) as self-probes.
      const selfProbes = sum(s, 'tilebreaker_self_probes_total', { endpoint: key });
      assert.equal(
        sum(s, 'tilebreaker_requests_total', { source: 'demo', endpoint: key }) + selfProbes,
        tiles.stats.requests,
        excerpt,
      );
      // Each answer counted under its classification: the 200s as successes, the outage's 503s as transient (how
      // many 503s the outage drew depends on timing, so the server's own count is the measure, not a constant).
      assert.ok(
        sum(s, 'tilebreaker_requests_total', { endpoint: key, outcome: 'success' }) >= again.counts.ok,
        excerpt,
      );
      assert.equal(
        sum(s, 'tilebreaker_requests_total', { endpoint: key, outcome: 'success' }) +
          sum(s, 'tilebreaker_self_probes_total', { endpoint: key, outcome: 'success' }),
        tiles.stats.ok,
        excerpt,
      );
      assert.ok(tiles.stats.whileDown >= 1, 'the outage answered some requests with 503');
      assert.equal(
        sum(s, 'tilebreaker_requests_total', { endpoint: key, outcome: 'transient' }) +
          sum(s, 'tilebreaker_self_probes_total', { endpoint: key, outcome: 'transient' }),
        tiles.stats.whileDown,
        excerpt,
      );
      assert.equal(
        sum(s, 'tilebreaker_request_duration_seconds_count', { endpoint: key }) + selfProbes,
        tiles.stats.requests,
        excerpt,
      );
      assert.ok(
        sum(s, 'tilebreaker_request_duration_seconds_sum', { endpoint: key }) >= 0.02 * tiles.stats.requests,
        'durations in seconds',
      );
      const buckets = s
        .filter((x) => x.name === 'tilebreaker_request_duration_seconds_bucket' && x.labels['endpoint'] === key)
        .map((x) => x.labels['le']);
      assert.deepEqual(
        buckets,
        [...REQUEST_DURATION_BUCKETS.map(String), '+Inf'],
        'our buckets, not the SDK default ones',
      );
      assert.equal(sum(s, 'tilebreaker_dead_letters_pending', { mosaic: output }), 0, 'the re-drive cleared them');
      assert.equal(sum(s, 'tilebreaker_mosaics_finished_total', { result: 'complete' }), 1, excerpt);
      // The state gauge: exactly one state shows 1 for the endpoint.
      const states = s.filter((x) => x.name === 'tilebreaker_breaker_state' && x.labels['endpoint'] === key);
      assert.equal(states.length, 6, excerpt);
      assert.equal(states.filter((x) => x.value === 1).length, 1, excerpt);
      // The SDK's own metrics on the same endpoint.
      assert.ok(
        s.some((x) => x.name.startsWith('temporal_') && x.labels['namespace'] === namespace),
        scrape.slice(0, 2_000),
      );
      worker.kill('SIGTERM');
      const [code] = (await once(worker, 'exit')) as [number | null];
      assert.equal(code, 0, stderr);
    } finally {
      await connection?.close();
      if (worker && worker.exitCode === null) worker.kill('SIGKILL');
      server.kill('SIGTERM');
      if (server.exitCode === null) await once(server, 'exit');
      await tiles.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

async function until(pred: () => boolean, ms: number, what: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out; so far:\n${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
