import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fastFigures, figures, parsePolicyConfig, record, recordSpread, step, initialState, stateName, type RollingWindow } from '../../src/breaker';

// A worker of a large fleet reports its successes every 30 s or so: the report's older part is spread over the
// span it covers instead of landing in the current bucket.

const config = parsePolicyConfig({ windowMs: 30_000, bucketMs: 250, minSamples: 20, failureRatio: 0.5, fastWindowMs: 1_000 });
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
  const spread = recordSpread(record([], T2001, { transient: 30, success: 10 }, undefined, config), T2001, { success: 2_400 }, undefined, 24_000, 1_000, config);
  const fast = fastFigures(spread, T2001, config)!;
  assert.ok(fast.failureRatio >= 0.5, `fast ratio ${fast.failureRatio}`);
  // All of it in the current bucket, as an entity without spreading records it: the fast window reads 30 of 2,440.
  const piled = record([], T2001, { transient: 30, success: 2_410 }, undefined, config);
  assert.ok(fastFigures(piled, T2001, config)!.failureRatio < 0.05);
});

test("a report's earlier part goes through the policy: a spread summary with fresh failures trips, the piled one does not", () => {
  const s0 = initialState(config);
  const spread = step(s0, { type: 'report', counts: { transient: 30, success: 10 }, earlier: { counts: { success: 2_400 }, fromAgoMs: 24_000, toAgoMs: 1_000 } }, T2001, 0.5);
  assert.equal(stateName(spread.state), 'open');
  const piled = step(s0, { type: 'report', counts: { transient: 30, success: 2_410 } }, T2001, 0.5);
  assert.equal(stateName(piled.state), 'closed');
});
