import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  LATENCY_BOUNDS_MS,
  LATENCY_BUCKETS,
  addInto,
  bucketIndex,
  countAbove,
  emptyHistogram,
  histogramOf,
  percentile,
  stallAfterMs,
  stallAfterOfHistogram,
  totalOf,
} from '../../src/breaker';
import { prng } from '../helpers/prng';

/** Nearest-rank p-quantile of raw samples: the true value the histogram estimates. */
function trueQuantile(samples: readonly number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

describe('histogram layout', () => {
  test('bounds run from 1 ms to 100 s, ten per decade, strictly ascending, plus an overflow bucket', () => {
    assert.equal(LATENCY_BOUNDS_MS.length, 51);
    assert.equal(LATENCY_BUCKETS, 52);
    assert.equal(LATENCY_BOUNDS_MS[0], 1);
    assert.equal(LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1], 100_000);
    assert.deepEqual(LATENCY_BOUNDS_MS.slice(0, 11), [1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8, 10]);
    assert.equal(LATENCY_BOUNDS_MS[30], 1_000);
    assert.equal(LATENCY_BOUNDS_MS[35], 3_150);
    for (let i = 1; i < LATENCY_BOUNDS_MS.length; i++) {
      const ratio = LATENCY_BOUNDS_MS[i]! / LATENCY_BOUNDS_MS[i - 1]!;
      assert.ok(ratio > 1 && ratio <= 1.28 + 1e-9, `bound ${i}: ratio ${ratio}`);
    }
  });

  test('the bounds cannot be changed at run time', () => {
    assert.ok(Object.isFrozen(LATENCY_BOUNDS_MS));
  });

  test('an empty histogram has one zero counter per bucket', () => {
    const h = emptyHistogram();
    assert.equal(h.length, LATENCY_BUCKETS);
    assert.ok(h.every((c) => c === 0));
    assert.notEqual(emptyHistogram(), h, 'a fresh array each time');
  });
});

describe('bucketIndex', () => {
  test("a sample on a bound falls in that bound's bucket, just above it in the next", () => {
    for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) {
      const bound = LATENCY_BOUNDS_MS[i]!;
      assert.equal(bucketIndex(bound), i, `bound ${bound}`);
      assert.equal(bucketIndex(bound + 1e-6), i + 1, `just above ${bound}`);
    }
  });
  test('zero and sub-millisecond samples go to the first bucket', () => {
    assert.equal(bucketIndex(0), 0);
    assert.equal(bucketIndex(0.3), 0);
  });
  test('samples above 100 s go to the overflow bucket', () => {
    assert.equal(bucketIndex(100_000.5), 51);
    assert.equal(bucketIndex(3_600_000), 51);
  });
});

describe('countAbove', () => {
  test('counts whole buckets above the threshold and interpolates the one it falls in', () => {
    const h = histogramOf([5, 50, 500, 5_000, 200_000]);
    assert.equal(countAbove(h, 1_000), 2, 'the 5 s sample and the overflow bucket');
    assert.equal(countAbove(h, 0), 5);
    assert.equal(countAbove(emptyHistogram(), 10), 0);
    // 500 ms lies in (400, 500]: a threshold of 450 counts half of that bucket, plus the two above it.
    assert.equal(countAbove(histogramOf([500]), 450), 0.5);
    assert.equal(countAbove(h, 450), 2.5);
    assert.equal(countAbove(h, 500), 2, 'a threshold on a bound counts nothing of that bucket');
  });
});

describe('histogram arithmetic', () => {
  test('histogramOf counts each sample in its bucket', () => {
    const h = histogramOf([0.5, 1, 1.1, 9, 10, 250_000]);
    assert.equal(totalOf(h), 6);
    assert.equal(h[0], 2);
    assert.equal(h[1], 1);
    assert.equal(h[bucketIndex(10)], 2);
    assert.equal(h[51], 1);
  });

  test('addInto adds index by index and mutates only its target', () => {
    const into = histogramOf([5, 50]);
    const from = histogramOf([5, 500]);
    const fromCopy = [...from];
    addInto(into, from);
    assert.deepEqual(from, fromCopy);
    assert.equal(into[bucketIndex(5)], 2);
    assert.equal(into[bucketIndex(50)], 1);
    assert.equal(into[bucketIndex(500)], 1);
    assert.equal(totalOf(into), 4);
  });

  test('addInto takes a shorter source as far as it goes and ignores the tail of a longer one', () => {
    const into = emptyHistogram();
    addInto(into, [3, 1]);
    assert.equal(into[0], 3);
    assert.equal(into[1], 1);
    assert.equal(totalOf(into), 4);
    const longer = new Array<number>(LATENCY_BUCKETS + 5).fill(1);
    addInto(into, longer);
    assert.equal(into.length, LATENCY_BUCKETS);
    assert.equal(totalOf(into), 4 + LATENCY_BUCKETS);
  });

  test('merged histograms give the same percentile as one histogram of all samples', () => {
    const a = [3, 7, 12, 40, 41, 90];
    const b = [5, 5, 300, 1_200];
    const merged = histogramOf(a);
    addInto(merged, histogramOf(b));
    assert.deepEqual(merged, histogramOf([...a, ...b]));
    assert.equal(percentile(merged, 0.95), percentile(histogramOf([...a, ...b]), 0.95));
  });
});

describe('percentile', () => {
  test('an empty histogram has no percentile', () => {
    assert.equal(percentile(emptyHistogram(), 0.95), null);
    assert.equal(percentile([], 0.5), null);
  });

  test('a percentile interpolates linearly inside its bucket', () => {
    // 10 samples in (8, 10]: the 95th percentile is 95 % of the way through that bucket.
    const h = histogramOf(new Array<number>(10).fill(9));
    assert.ok(Math.abs(percentile(h, 0.95)! - 9.9) < 1e-9);
    assert.ok(Math.abs(percentile(h, 0.5)! - 9) < 1e-9);
    assert.equal(percentile(h, 1), 10);
  });

  test('the percentile lands in the bucket holding the rank', () => {
    // 90 fast samples (bucket (8, 10]) and 10 slow (bucket (800, 1000]): p95 sits in the slow bucket.
    const h = histogramOf([...new Array<number>(90).fill(9), ...new Array<number>(10).fill(900)]);
    const p95 = percentile(h, 0.95)!;
    assert.ok(p95 > 800 && p95 <= 1_000, `p95 ${p95}`);
    const p50 = percentile(h, 0.5)!;
    assert.ok(p50 > 8 && p50 <= 10, `p50 ${p50}`);
  });

  test('samples beyond 100 s report the last bound', () => {
    assert.equal(percentile(histogramOf([500_000, 600_000]), 0.95), 100_000);
  });

  test('the percentile never decreases as q grows', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 200_000, noNaN: true }), { minLength: 1, maxLength: 200 }),
        (samples) => {
          const h = histogramOf(samples);
          let last = -Infinity;
          for (const q of [0.01, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1]) {
            const p = percentile(h, q)!;
            assert.ok(p >= last, `q=${q}: ${p} < ${last}`);
            last = p;
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  test('the estimate lies in the bucket of the true quantile', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 1, max: 99_000, noNaN: true }), { minLength: 1, maxLength: 300 }),
        (samples) => {
          const truth = trueQuantile(samples, 0.95);
          const i = bucketIndex(truth);
          const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
          const upper = LATENCY_BOUNDS_MS[i]!;
          const p = percentile(histogramOf(samples), 0.95)!;
          assert.ok(p >= lower && p <= upper, `p95 ${p} outside (${lower}, ${upper}] of true ${truth}`);
        },
      ),
      { numRuns: 300 },
    );
  });

  // The bound latency.ts documents: buckets at most 1.28x wide, and the estimate lies in the truth's bucket.
  test('p95 is within 30 % of the true p95 on generated latency distributions', () => {
    const distribution = fc.oneof(
      // Log-normal latencies: median 2 ms .. 20 s, moderate to heavy tails.
      fc.record({
        kind: fc.constant('lognormal' as const),
        median: fc.double({ min: 2, max: 20_000, noNaN: true }),
        sigma: fc.double({ min: 0.3, max: 1.5, noNaN: true }),
      }),
      // Uniform latencies over a range at least twice as wide as its start.
      fc.record({
        kind: fc.constant('uniform' as const),
        low: fc.double({ min: 1, max: 20_000, noNaN: true }),
        spread: fc.double({ min: 2, max: 50, noNaN: true }),
      }),
      // A healthy body with a slow tail (a degrading server).
      fc.record({
        kind: fc.constant('bimodal' as const),
        fast: fc.double({ min: 5, max: 200, noNaN: true }),
        slowFactor: fc.double({ min: 3, max: 50, noNaN: true }),
        slowShare: fc.double({ min: 0.02, max: 0.5, noNaN: true }),
      }),
    );
    fc.assert(
      fc.property(distribution, fc.integer({ min: 200, max: 2_000 }), fc.integer(), (d, n, seed) => {
        const rand = prng(seed);
        const normal = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
        const draw = (): number => {
          switch (d.kind) {
            case 'lognormal':
              return d.median * Math.exp(d.sigma * normal());
            case 'uniform':
              return d.low + rand() * d.low * (d.spread - 1);
            case 'bimodal': {
              const base = rand() < d.slowShare ? d.fast * d.slowFactor : d.fast;
              return base * (0.5 + rand());
            }
          }
        };
        const samples = Array.from({ length: n }, () => Math.min(Math.max(draw(), 1), 90_000));
        const truth = trueQuantile(samples, 0.95);
        const estimate = percentile(histogramOf(samples), 0.95)!;
        const error = Math.abs(estimate - truth) / truth;
        assert.ok(
          error < 0.3,
          `p95 estimate ${estimate} vs true ${truth}: ${(error * 100).toFixed(1)} % off (${JSON.stringify(d)}, n=${n})`,
        );
      }),
      {
        numRuns: 300,
        // A case that once came out 25-30 % off (p95 at the edge of the slow mode): kept as a regression example.
        examples: [
          [
            { kind: 'bimodal', fast: 21.00226129165377, slowFactor: 3.178488055304773, slowShare: 0.04543420067057014 },
            200,
            0,
          ],
        ],
      },
    );
  });

  test('p95 is within 30 % even when every sample sits just above a bucket bound (buckets are up to 1.28x wide)', () => {
    for (const ms of [1.26, 6.31, 315.1]) {
      const samples = new Array<number>(100).fill(ms);
      const estimate = percentile(histogramOf(samples), 0.95)!;
      assert.ok(Math.abs(estimate - ms) / ms < 0.3, `estimate ${estimate} for ${ms}`);
    }
  });
});

describe('stallAfterMs', () => {
  test('is the p95 plus four mean deviations, and at least 1.5 x the p95', () => {
    assert.equal(stallAfterMs(2_900, 500), 4_900);
    assert.equal(stallAfterMs(2_900, 500, 2), 4_350, 'two deviations: the half-p95 least holds');
    assert.equal(stallAfterMs(2_000, 0), 3_000, 'a steady endpoint: a pause of a fraction of a render is no stall');
  });

  test('from a histogram: near the exact figure for a renderer taking 1-3 s, null with too few samples', () => {
    const samples = Array.from({ length: 200 }, (_, i) => 1_000 + i * 10);
    const exactMean = samples.reduce((a, b) => a + b, 0) / samples.length;
    const exact = stallAfterMs(2_890, samples.reduce((a, b) => a + Math.abs(b - exactMean), 0) / samples.length);
    const got = stallAfterOfHistogram(histogramOf(samples), 20)!;
    assert.ok(Math.abs(got - exact) / exact < 0.15, `${got} within 15 % of ${exact}`);
    assert.equal(stallAfterOfHistogram(histogramOf(samples.slice(0, 19)), 20), null);
    assert.equal(stallAfterOfHistogram(histogramOf([]), 0), null);
  });
});
