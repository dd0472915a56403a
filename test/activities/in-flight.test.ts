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
    assert.equal(calls.thresholdMs(KEY, 300), 5_000, 'a fleet of fast calls on the same host does not shorten the wait of a process that has not learned its own');
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
