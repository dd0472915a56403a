import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReportBuffer } from '../../src/activities/guard/report-buffer';
import {
  fastFigures,
  figures,
  parsePolicyConfig,
  record,
  recordSpread,
  step,
  initialState,
  stateName,
  type RollingWindow,
} from '../../src/breaker';

// A worker of a large fleet reports its successes every 30 s or so: the report's older part is spread over the
// span it covers instead of landing in the current bucket.

const config = parsePolicyConfig({
  windowMs: 30_000,
  bucketMs: 250,
  minSamples: 20,
  failureRatio: 0.5,
  fastWindowMs: 1_000,
});
/** An arbitrary instant far from today. */
const T2001 = Date.UTC(2001, 5, 7);
const total = (w: RollingWindow, kind: 'success' | 'transient') => w.reduce((n, b) => n + b.counts[kind], 0);

test('an earlier span is spread evenly over its buckets, every outcome kept, in ascending order', () => {
  const w = recordSpread([], T2001, { success: 2_400 }, undefined, 24_000, 1_000, config);
  assert.equal(total(w, 'success'), 2_400);
  assert.equal(w.length, 93); // (24 s - 1 s) / 250 ms, both ends' buckets counted
  for (let i = 1; i < w.length; i++) assert.ok(w[i]!.start > w[i - 1]!.start);
  const per = w.map((b) => b.counts.success);
  assert.ok(Math.max(...per) - Math.min(...per) <= 1, `uneven: ${Math.min(...per)}..${Math.max(...per)}`);
});

test('spreading merges with the buckets already there and keeps the window ordered', () => {
  let w = record([], T2001 - 10_000, { transient: 3 }, undefined, config);
  w = record(w, T2001, { transient: 5 }, undefined, config);
  w = recordSpread(w, T2001, { success: 100 }, undefined, 20_000, 0, config);
  assert.equal(total(w, 'transient'), 8);
  assert.equal(total(w, 'success'), 100);
  for (let i = 1; i < w.length; i++) assert.ok(w[i]!.start > w[i - 1]!.start);
});

test('the part of a span older than the window is dropped in proportion, as if it had slid out', () => {
  const w = recordSpread([], T2001, { success: 600 }, undefined, 60_000, 0, config);
  assert.equal(figures(w, T2001, config).successes, 300);
});

test('a late success summary does not dilute the fast window: fresh failures still read as a failing endpoint', () => {
  // 24 s of successes (100/s) arrive with 30 fresh failures and 10 fresh successes.
  const spread = recordSpread(
    record([], T2001, { transient: 30, success: 10 }, undefined, config),
    T2001,
    { success: 2_400 },
    undefined,
    24_000,
    1_000,
    config,
  );
  const fast = fastFigures(spread, T2001, config)!;
  assert.ok(fast.failureRatio >= 0.5, `fast ratio ${fast.failureRatio}`);
  // All of it in the current bucket, as an entity without spreading records it: the fast window reads 30 of 2,440.
  const piled = record([], T2001, { transient: 30, success: 2_410 }, undefined, config);
  assert.ok(fastFigures(piled, T2001, config)!.failureRatio < 0.05);
});

test("a report's earlier part goes through the policy: a spread summary with fresh failures trips, the piled one does not", () => {
  const s0 = initialState(config);
  const spread = step(
    s0,
    {
      type: 'report',
      counts: { transient: 30, success: 10 },
      earlier: { counts: { success: 2_400 }, fromAgoMs: 24_000, toAgoMs: 1_000 },
    },
    T2001,
    0.5,
  );
  assert.equal(stateName(spread.state), 'open');
  const piled = step(s0, { type: 'report', counts: { transient: 30, success: 2_410 } }, T2001, 0.5);
  assert.equal(stateName(piled.state), 'closed');
});

test('a fleet whose workers report successes every 8 s still trips within moments of an outage (simulated clock)', () => {
  // 60 workers, 2 calls a second each, reporting every 8 s (jittered) while healthy; at the outage every call
  // fails and a worker whose recent outcomes turn bad reports 50 ms later, as report-sender.ts does.
  const cfg = parsePolicyConfig({ windowMs: 30_000, minSamples: 20, failureRatio: 0.5 });
  let state = initialState(cfg);
  let seed = 7;
  const rand = () => (seed = (seed * 16_807) % 2_147_483_647) / 2_147_483_647;
  const workers = Array.from({ length: 60 }, (_, i) => ({
    buffer: new ReportBuffer(1_000),
    dueAt: T2001 + rand() * 8_000,
    alarmAt: 0,
    next: T2001 + i * 17,
  }));
  const outageAt = T2001 + 60_000;
  let openedAt: number | null = null;
  for (let t = T2001; t < outageAt + 10_000 && openedAt === null; t += 10) {
    for (const w of workers) {
      if (t >= w.next) {
        const failing = t >= outageAt;
        w.buffer.add(failing ? 'service-exception' : 'success', failing ? 5 : 150, undefined, t);
        w.next = t + 500;
        if (failing && !w.alarmAt && w.buffer.recentlyFailing(t)) w.alarmAt = t + 50;
      }
      const due = (w.alarmAt && t >= w.alarmAt) || t >= w.dueAt;
      if (due && !w.buffer.empty) {
        const r = w.buffer.take('w', t);
        const { earlier } = r;
        const recent = Object.fromEntries(
          Object.entries(r.counts).map(([k, n]) => [
            k,
            n - ((earlier?.counts as Record<string, number> | undefined)?.[k] ?? 0),
          ]),
        );
        state = step(state, { type: 'report', counts: recent, ...(earlier ? { earlier } : {}) }, t, 0.5).state;
        if (stateName(state) === 'open' && openedAt === null) openedAt = t;
        if (!w.alarmAt) w.dueAt = t + 8_000 * (0.8 + 0.4 * rand());
        w.alarmAt = 0;
      }
    }
  }
  assert.notEqual(openedAt, null, 'never opened');
  assert.ok(openedAt! >= outageAt, 'opened while healthy');
  assert.ok(openedAt! - outageAt <= 2_000, `opened ${openedAt! - outageAt} ms into the outage`);
});
