import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import type {
  MetricCounter,
  MetricGauge,
  MetricHistogram,
  MetricMeter,
  MetricTags,
  NumericMetricValueType,
} from '@temporalio/common';
import { BreakerGuard } from '../../src/activities/guard';
import { DeadLetterWatch } from '../../src/activities/metrics/dead-letter-watch';
import { BreakerStateGauge } from '../../src/activities/metrics/state-gauge';
import { WorkerMetrics } from '../../src/activities/metrics/worker-metrics';
import { breakerKey, breakerView, DEFAULT_POLICY_CONFIG, initialState } from '../../src/breaker';
import { refusedPort } from '../helpers/fault-server';

/** A meter that keeps what it was told: counters summed, gauges' last values, histograms' values. */
class RecordingMeter implements MetricMeter {
  readonly values = new Map<string, number>();
  readonly recorded: { name: string; value: number; tags: MetricTags }[] = [];
  createCounter(name: string): MetricCounter {
    const add = (value: number, tags: MetricTags = {}) =>
      this.values.set(this.id(name, tags), (this.values.get(this.id(name, tags)) ?? 0) + value);
    return { name, kind: 'counter', valueType: 'int', add, withTags: () => assert.fail('not used') };
  }
  createGauge(name: string, valueType: NumericMetricValueType = 'int'): MetricGauge {
    return {
      name,
      kind: 'gauge',
      valueType,
      set: (value, tags = {}) => this.values.set(this.id(name, tags), value),
      withTags: () => assert.fail('not used'),
    };
  }
  createHistogram(name: string, valueType: NumericMetricValueType = 'int'): MetricHistogram {
    return {
      name,
      kind: 'histogram',
      valueType,
      record: (value, tags = {}) => this.recorded.push({ name, value, tags }),
      withTags: () => assert.fail('not used'),
    };
  }
  withTags(): MetricMeter {
    return assert.fail('not used');
  }
  get(name: string, tags: MetricTags): number | undefined {
    return this.values.get(this.id(name, tags));
  }
  private id(name: string, tags: MetricTags): string {
    return `${name}${JSON.stringify(Object.entries(tags).sort())}`;
  }
}

test('the guard counts its fail-opens under the breaker key (refusals: test/cli/worker-metrics.test.ts)', async () => {
  const meter = new RecordingMeter();
  // No server there: every call fails.
  const client = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${await refusedPort()}` }) });
  const guard = new BreakerGuard({
    client,
    taskQueue: 'q',
    reporter: 'w1',
    rpcTimeoutMs: 300,
    cacheTtlMs: 60_000,
    logger: { warn: () => {} },
    metrics: new WorkerMetrics(() => meter),
  });
  const key = breakerKey('http://tiles.example.test');
  try {
    for (let i = 0; i < 3; i++) assert.equal((await guard.acquire(key)).kind, 'proceed');
    assert.equal(guard.stats.failOpen, 3);
    assert.equal(meter.get('tilebreaker_guard_fail_open', { endpoint: key, reason: 'unreachable' }), 3);
    assert.equal(
      meter.get('tilebreaker_breaker_state', { endpoint: key, state: 'closed' }),
      undefined,
      'no view read: no state shown',
    );
    // A report that cannot be delivered is dropped and counted under the key.
    guard.release({ kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: true }, { kind: 'transient' });
    await guard.flush();
    assert.equal(meter.get('tilebreaker_guard_reports_dropped', { endpoint: key }), 1);
  } finally {
    await guard.close();
    await client.connection.close();
  }
});

test('the state gauge: the state the view shows is 1, the others 0; refreshed while used, or while open or half-open however idle; all 0 once forgotten after the close', async () => {
  const meter = new RecordingMeter();
  const key = 'http://tiles.example.test:80';
  const view = breakerView(initialState(DEFAULT_POLICY_CONFIG));
  let shownState: 'open' | 'half-open' | 'closed' = 'open';
  let reads = 0;
  const gauge = new BreakerStateGauge(
    new WorkerMetrics(() => meter),
    () => {
      reads++;
      gauge.shown(key, { ...view, state: shownState });
      return Promise.resolve();
    },
    { refreshMs: 20, forgetMs: 150 },
  );
  const state = (s: string) => meter.get('tilebreaker_breaker_state', { endpoint: key, state: s });
  try {
    gauge.shown(key, null);
    assert.equal(state('closed'), undefined, 'a key no call used is not shown');
    gauge.used(key);
    gauge.shown(key, null);
    assert.deepEqual(
      ['closed', 'open', 'half-open', 'forced-open', 'forced-closed', 'metrics-only'].map(state),
      [1, 0, 0, 0, 0, 0],
      'no entity: closed',
    );
    await until(() => reads >= 2);
    assert.equal(state('open'), 1);
    assert.equal(state('closed'), 0);
    // Idle three times forgetMs, but open, then half-open: still read and shown (the stuck-open page needs it
    // after the run that used it has ended).
    await delay(300);
    shownState = 'half-open';
    const idle = reads;
    await until(() => reads >= idle + 2 && state('half-open') === 1);
    assert.equal(state('open'), 0);
    // It closes: shown closed for one forgetMs more, then forgotten and no longer read.
    shownState = 'closed';
    await until(() => state('closed') === 1);
    await until(() => state('closed') === 0);
    assert.deepEqual(
      ['closed', 'open', 'half-open', 'forced-open', 'forced-closed', 'metrics-only'].map(state),
      [0, 0, 0, 0, 0, 0],
      'idle past forgetMs after the close: no view',
    );
    const after = reads;
    await delay(80);
    assert.equal(reads, after, 'a forgotten key is not read again');
  } finally {
    gauge.stop();
  }
});

test('requests: one count with the outcome and one duration in seconds per request', () => {
  const meter = new RecordingMeter();
  const m = new WorkerMetrics(() => meter);
  m.request('osm', 'https://tiles.example.test:443', 'service-exception', 0.25);
  m.request('osm', 'https://tiles.example.test:443', 'service-exception', 0.5);
  m.fallback('osm', 'https://tiles.example.test:443', 'stale', 0);
  assert.equal(
    meter.get('tilebreaker_requests', {
      source: 'osm',
      endpoint: 'https://tiles.example.test:443',
      outcome: 'service-exception',
    }),
    2,
  );
  assert.deepEqual(
    meter.recorded.map((r) => r.value),
    [0.25, 0.5],
  );
  assert.equal(
    meter.get('tilebreaker_fallback', { source: 'osm', endpoint: 'https://tiles.example.test:443', tier: 'stale' }),
    undefined,
    'nothing added for no tiles',
  );
});

/** Waits for `pred` (timers may run late on a loaded machine: patience, not a target). */
async function until(pred: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) assert.fail('timed out');
    await delay(10);
  }
}

test('dead letters pending: the worker that showed them reads the manifest again, so a re-drive assembled elsewhere clears its gauge', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tb-dead-letters-'));
  const manifest = path.join(dir, 'alps.manifest.json');
  const mosaic = path.join(dir, 'alps.tif');
  const write = (dead: number, mtime: number) => {
    writeFileSync(
      manifest,
      JSON.stringify({ counts: { ok: 10 - dead, stale: 0, hole: 0, 'dead-lettered': dead, failed: 0 }, tiles: [] }),
    );
    utimesSync(manifest, mtime, mtime);
  };
  // Two worker processes: A assembled the night's run, B the re-drive.
  const a = new RecordingMeter();
  const b = new RecordingMeter();
  const watchA = new DeadLetterWatch(new WorkerMetrics(() => a), 3_600_000);
  const watchB = new DeadLetterWatch(new WorkerMetrics(() => b), 3_600_000);
  try {
    write(4, 1_000_000_000);
    await watchA.finished(mosaic, manifest, 4);
    assert.equal(a.get('tilebreaker_dead_letters_pending', { mosaic }), 4);
    await watchA.check();
    assert.equal(a.get('tilebreaker_dead_letters_pending', { mosaic }), 4, 'the manifest has not changed');
    write(1, 1_000_000_100);
    await watchB.finished(mosaic, manifest, 1);
    await watchA.check();
    assert.equal(a.get('tilebreaker_dead_letters_pending', { mosaic }), 1, 'a re-drive that left one');
    write(0, 1_000_000_200);
    await watchB.finished(mosaic, manifest, 0);
    await watchA.check();
    assert.deepEqual(
      [a.get('tilebreaker_dead_letters_pending', { mosaic }), b.get('tilebreaker_dead_letters_pending', { mosaic })],
      [0, 0],
    );
    // Cleared: no longer looked at, whatever the file does next.
    write(7, 1_000_000_300);
    await watchA.check();
    assert.equal(a.get('tilebreaker_dead_letters_pending', { mosaic }), 0);
  } finally {
    watchA.stop();
    watchB.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
