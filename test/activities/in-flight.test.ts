import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InFlightCalls } from '../../src/activities/guard/in-flight';

const KEY = 'https://tiles.example/wms';

/** A tracker that has seen `latencies` succeed on KEY. */
function learned(latencies: number[], options = {}): InFlightCalls {
  const calls = new InFlightCalls(options);
  for (const ms of latencies) {
    const d = {};
    calls.start(d, KEY, 0);
    calls.end(d, { latencyMs: ms });
  }
  return calls;
}

describe('the stall threshold', () => {
  test('follows the spread of healthy latency, not its length: a 1-3 s renderer is judged after about 5 s', () => {
    const calls = learned(Array.from({ length: 64 }, (_, i) => 1_000 + Math.round((i * 2_000) / 63)));
    const t = calls.thresholdMs(KEY);
    // p95 about 2.9 s plus four mean deviations of about 0.5 s: where 4 x p95 would be 11.6 s.
    assert.ok(t > 4_500 && t < 5_200, `threshold ${t}`);
  });

  test('a steady endpoint gets 1.5 x its p95, never below floorMs', () => {
    assert.equal(learned(Array.from({ length: 20 }, () => 2_000)).thresholdMs(KEY), 3_000);
    assert.equal(learned(Array.from({ length: 20 }, () => 40)).thresholdMs(KEY), 1_000);
    assert.equal(
      learned(
        Array.from({ length: 20 }, () => 40),
        { floorMs: 200 },
      ).thresholdMs(KEY),
      200,
    );
  });

  test("before MIN_LEARNED successes: initialMs, or the fleet's threshold from the view when that is longer", () => {
    const calls = learned([300, 400, 500]);
    assert.equal(calls.thresholdMs(KEY), 5_000);
    assert.equal(calls.thresholdMs(KEY, 8_400), 8_400, 'a fleet rendering in seconds: its calls are not judged sooner');
    assert.equal(
      calls.thresholdMs(KEY, 300),
      5_000,
      'a fleet of fast calls on the same host does not shorten the wait of a process that has not learned its own',
    );
    assert.equal(new InFlightCalls({ initialMs: 3_000 }).thresholdMs(KEY), 3_000);
  });

  test('a sweep counts a call once per threshold it waits, with the fleet threshold for an unlearned key', () => {
    const calls = new InFlightCalls();
    const d = {};
    calls.start(d, KEY, 0);
    assert.equal(calls.sweep(7_900, () => 8_000).get(KEY), undefined);
    assert.equal(calls.sweep(8_100, () => 8_000).get(KEY), 1);
    assert.equal(calls.sweep(16_100, () => 8_000).get(KEY), 1);
    assert.equal(calls.sweep(16_200, () => 8_000).get(KEY), undefined);
    assert.equal(calls.end(d, null), 2);
  });

  test('a call sent again (dropped as a hang ended) starts its time in flight over, keeping what was counted', () => {
    const calls = new InFlightCalls();
    const fresh = {};
    calls.start(fresh, KEY, 0);
    calls.restart(fresh, 4_000);
    assert.equal(calls.sweep(8_500).get(KEY), undefined, 'the first attempt waited 4 s: not a stall of the second');
    assert.equal(calls.end(fresh, { latencyMs: 4_500 }), 0);
    const stalled = {};
    calls.start(stalled, KEY, 0);
    assert.equal(calls.sweep(5_100).get(KEY), 1);
    calls.restart(stalled, 6_000);
    assert.equal(calls.sweep(10_900).get(KEY), undefined);
    assert.equal(calls.sweep(11_100).get(KEY), 1, 'a second stall, counted from the restart');
    assert.equal(calls.end(stalled, null), 2);
  });
});

describe('a key that stopped answering', () => {
  // Learned: 2-3 s answers (p95 about 2.95 s; the stall threshold 1.5 x that, about 4.4 s).
  const renderer = () => learned(Array.from({ length: 32 }, (_, i) => 2_000 + Math.round((i * 1_000) / 31)));

  test('once a call has stalled and none sent after it has answered, the calls sent since count at the p95', () => {
    const calls = renderer();
    const t = calls.thresholdMs(KEY);
    // The hang begins at 1 000: a call sent before it answers at 2 500; four sent after it hang.
    const before = {};
    calls.start(before, KEY, 0);
    calls.end(before, { latencyMs: 2_500 });
    const hung = [1_000, 1_800, 2_400, 3_400].map((at) => {
      const d = {};
      calls.start(d, KEY, at);
      return d;
    });
    assert.equal(calls.sweep(1_000 + t - 10).get(KEY), undefined, 'nothing has waited the threshold yet');
    // The first hung call stalls; the second (age about 4.1 s) and third (3.05 s) are past the p95: three at once.
    assert.equal(calls.sweep(1_000 + t).get(KEY), 3);
    // The fourth passes the p95 later and counts then; nothing counts twice.
    assert.equal(calls.sweep(3_400 + 3_000).get(KEY), 1);
    assert.equal(calls.sweep(3_400 + 3_100).get(KEY), undefined);
    assert.deepEqual(
      hung.map((d) => calls.end(d, null)),
      [1, 1, 1, 1],
    );
  });

  test('a call past the threshold among later calls that answered (one slow render) lowers nothing', () => {
    const calls = renderer();
    const t = calls.thresholdMs(KEY);
    const slow = {};
    calls.start(slow, KEY, 0);
    const later = {};
    calls.start(later, KEY, 500);
    calls.end(later, { latencyMs: 2_400 });
    const waiting = {};
    calls.start(waiting, KEY, 1_000);
    // The slow call stalls; `waiting` is past the p95 but a call sent after the slow one has answered.
    assert.equal(calls.sweep(t).get(KEY), 1);
    assert.equal(calls.end(waiting, { latencyMs: t - 900 }), 0);
    assert.equal(calls.end(slow, null), 1);
  });

  test('before this process has learned the latency, only the threshold counts', () => {
    const calls = new InFlightCalls();
    const a = {};
    const b = {};
    calls.start(a, KEY, 0);
    calls.start(b, KEY, 2_000);
    assert.equal(
      calls.sweep(5_000).get(KEY),
      1,
      'a at the initial 5 s; b, 3 s old, is not judged by a p95 it does not know',
    );
    assert.equal(calls.sweep(7_000).get(KEY), 1);
  });
});
