import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  OUTCOME_KINDS,
  fastFigures,
  figures,
  histogramOf,
  parsePolicyConfig,
  percentile,
  prune,
  record,
  type OutcomeCounts,
  type RollingWindow,
  zeroCounts,
} from '../../src/breaker';

const config = parsePolicyConfig({ windowMs: 10_000, bucketMs: 1_000 });
/** An arbitrary instant far from today. */
const T2001 = Date.UTC(2001, 5, 7);

describe('bucketing', () => {
  test('a report lands in the bucket starting at now rounded down to bucketMs', () => {
    const w = record([], 12_345, { success: 2 }, undefined, config);
    assert.equal(w.length, 1);
    assert.equal(w[0]!.start, 12_000);
    assert.deepEqual(w[0]!.counts, { ...zeroCounts(), success: 2 });
  });

  test('reports in the same bucket merge into one', () => {
    let w = record([], 12_000, { success: 2, transient: 1 }, histogramOf([5]), config);
    w = record(w, 12_999, { success: 1, permanent: 4 }, histogramOf([50]), config);
    assert.equal(w.length, 1);
    assert.deepEqual(w[0]!.counts, { ...zeroCounts(), success: 3, transient: 1, permanent: 4 });
    assert.deepEqual(w[0]!.latency, histogramOf([5, 50]));
  });

  test('a report in a later bucket starts a new bucket at the end', () => {
    let w = record([], 12_999, { success: 1 }, undefined, config);
    w = record(w, 13_000, { transient: 1 }, undefined, config);
    assert.deepEqual(
      w.map((b) => b.start),
      [12_000, 13_000],
    );
    assert.equal(w[1]!.counts.transient, 1);
  });

  test('empty buckets are not stored', () => {
    let w = record([], 1_000, { success: 1 }, undefined, config);
    w = record(w, 6_500, { success: 1 }, undefined, config);
    assert.equal(w.length, 2);
  });

  test('a report without latency leaves the latency histogram empty', () => {
    const w = record([], 0, { success: 5 }, undefined, config);
    assert.ok(w[0]!.latency.every((c) => c === 0));
  });

  test('record never mutates the window it is given', () => {
    const w0 = record([], 12_000, { success: 1 }, histogramOf([5]), config);
    const copy = structuredClone(w0);
    const w1 = record(w0, 12_500, { transient: 3 }, histogramOf([7]), config);
    const w2 = record(w1, 40_000, { success: 1 }, undefined, config);
    assert.deepEqual(w0, copy);
    assert.notEqual(w1, w0);
    assert.equal(w1[0]!.counts.transient, 3);
    assert.equal(w2.length, 1, 'the old bucket slid out of the new window');
    assert.equal(w1.length, 1);
  });
});

describe('sliding', () => {
  test('a bucket stays while any part of it is inside the window and goes once all of it is older', () => {
    const w = record([], 1_500, { transient: 1 }, undefined, config); // bucket [1000, 2000)
    assert.equal(prune(w, 11_999, config).length, 1);
    assert.equal(prune(w, 12_000, config).length, 0);
    assert.equal(figures(w, 11_999, config).failures, 1);
    assert.equal(figures(w, 12_000, config).failures, 0);
  });

  test('prune returns a new array and keeps buckets in order', () => {
    let w: RollingWindow = [];
    for (const t of [0, 3_000, 6_000, 9_000]) w = record(w, t, { success: 1 }, undefined, config);
    const pruned = prune(w, 11_000, config);
    assert.notEqual(pruned, w);
    assert.deepEqual(
      pruned.map((b) => b.start),
      [3_000, 6_000, 9_000],
    );
    assert.equal(w.length, 4, 'the input keeps its buckets');
  });

  test('recording prunes: the stored window never holds more than windowMs / bucketMs + 1 buckets', () => {
    let w: RollingWindow = [];
    for (let t = 0; t < 60_000; t += 250) {
      w = record(w, t, { success: 1 }, undefined, config);
      assert.ok(w.length <= config.windowMs / config.bucketMs + 1, `at ${t}: ${w.length} buckets`);
    }
  });

  test('figures slide with now even when nothing new is recorded', () => {
    let w = record([], 0, { transient: 10 }, undefined, config);
    w = record(w, 5_000, { success: 10 }, undefined, config);
    assert.equal(figures(w, 5_000, config).failureRatio, 0.5);
    const later = figures(w, 11_000, config);
    assert.equal(later.failures, 0);
    assert.equal(later.successes, 10);
    assert.equal(later.failureRatio, 0);
  });
});

describe('figures', () => {
  test('figures total every outcome kind and derive n, samples and the failure ratio', () => {
    const counts: OutcomeCounts = {
      success: 6,
      transient: 3,
      'service-exception': 1,
      permanent: 4,
      neutral: 7,
      'rate-limited': 2,
    };
    const w = record([], 1_000, counts, histogramOf([10, 20, 30]), config);
    assert.deepEqual(figures(w, 1_000, config), {
      successes: 6,
      failures: 4,
      transient: 3,
      serviceException: 1,
      permanent: 4,
      neutral: 7,
      rateLimited: 2,
      n: 10,
      samples: 14,
      failureRatio: 0.4,
      latencySamples: 3,
      p95Ms: percentile(histogramOf([10, 20, 30]), 0.95),
      // The slow-call rule is on unless turned off (slowCallMs 10 s): none of these calls is that slow.
      slowCalls: 0,
    });
  });

  test('an empty window has zero figures, ratio 0 and no p95', () => {
    const f = figures([], 0, config);
    assert.equal(f.n, 0);
    assert.equal(f.samples, 0);
    assert.equal(f.failureRatio, 0);
    assert.equal(f.latencySamples, 0);
    assert.equal(f.p95Ms, null);
  });

  test('only neutral and rate-limited outcomes give n 0 and ratio 0', () => {
    const w = record([], 0, { neutral: 5, 'rate-limited': 5 }, undefined, config);
    const f = figures(w, 0, config);
    assert.equal(f.n, 0);
    assert.equal(f.samples, 0);
    assert.equal(f.failureRatio, 0);
    assert.equal(f.neutral, 5);
    assert.equal(f.rateLimited, 5);
  });

  test('the p95 merges latency from every bucket in the window', () => {
    let w = record([], 0, { success: 19 }, histogramOf(new Array<number>(19).fill(10)), config);
    w = record(w, 2_000, { success: 1 }, histogramOf([5_000]), config);
    const f = figures(w, 2_000, config);
    assert.equal(f.latencySamples, 20);
    assert.equal(f.p95Ms, percentile(histogramOf([...new Array<number>(19).fill(10), 5_000]), 0.95));
    assert.equal(figures(w, 11_000, config).latencySamples, 1, 'the first bucket slid out');
  });

  test('figures agree with a brute-force count over reports still inside the window', () => {
    const kind = fc.constantFrom(...OUTCOME_KINDS);
    const report = fc.record({
      dt: fc.integer({ min: 0, max: 4_000 }),
      counts: fc.dictionary(kind, fc.integer({ min: 0, max: 20 }), { maxKeys: 6 }),
      latency: fc.option(fc.array(fc.integer({ min: 1, max: 5_000 }), { maxLength: 5 }), { nil: undefined }),
    });
    const shape = fc
      .record({ windowMs: fc.integer({ min: 1_000, max: 20_000 }), buckets: fc.integer({ min: 1, max: 40 }) })
      .map(({ windowMs, buckets }) =>
        parsePolicyConfig({ windowMs, bucketMs: Math.max(100, Math.floor(windowMs / buckets)) }),
      );
    fc.assert(
      fc.property(
        shape,
        fc.array(report, { maxLength: 40 }),
        fc.integer({ min: 0, max: 30_000 }),
        (cfg, reports, lookAhead) => {
          let now = 0;
          let w: RollingWindow = [];
          const log: Array<{ at: number; counts: Partial<OutcomeCounts>; latency: number[] }> = [];
          for (const r of reports) {
            now += r.dt;
            w = record(w, now, r.counts, r.latency ? histogramOf(r.latency) : undefined, cfg);
            log.push({ at: now, counts: r.counts, latency: r.latency ?? [] });
          }
          const at = now + lookAhead;
          const kept = log.filter(
            (e) => Math.floor(e.at / cfg.bucketMs) * cfg.bucketMs + cfg.bucketMs > at - cfg.windowMs,
          );
          const sum = (k: (typeof OUTCOME_KINDS)[number]) => kept.reduce((acc, e) => acc + (e.counts[k] ?? 0), 0);
          const f = figures(w, at, cfg);
          assert.equal(f.successes, sum('success'));
          assert.equal(f.transient, sum('transient'));
          assert.equal(f.serviceException, sum('service-exception'));
          assert.equal(f.permanent, sum('permanent'));
          assert.equal(f.neutral, sum('neutral'));
          assert.equal(f.rateLimited, sum('rate-limited'));
          assert.equal(f.n, f.successes + f.failures);
          assert.equal(f.samples, f.n + f.permanent);
          const latency = kept.flatMap((e) => e.latency);
          assert.equal(f.latencySamples, latency.length);
          assert.equal(f.p95Ms, percentile(histogramOf(latency), 0.95));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('the fast window', () => {
  test('is the shortest run of newest buckets within fastWindowMs holding fastMinSamples samples, whatever the reports', () => {
    const kind = fc.constantFrom(...OUTCOME_KINDS);
    const report = fc.record({
      dt: fc.integer({ min: 0, max: 1_500 }),
      counts: fc.dictionary(kind, fc.integer({ min: 0, max: 9 }), { maxKeys: 6 }),
    });
    const shape = fc.record({
      fastWindowMs: fc.integer({ min: 0, max: 10_000 }),
      fastMinSamples: fc.integer({ min: 1, max: 60 }),
    });
    const cfg0 = parsePolicyConfig({ windowMs: 10_000, bucketMs: 250 });
    fc.assert(
      fc.property(
        shape,
        fc.array(report, { maxLength: 60 }),
        fc.integer({ min: 0, max: 3_000 }),
        ({ fastWindowMs, fastMinSamples }, reports, lookAhead) => {
          const cfg = { ...cfg0, fastWindowMs, fastMinSamples, minSamples: 1 };
          let now = T2001;
          let w: RollingWindow = [];
          for (const r of reports) w = record(w, (now += r.dt), r.counts, undefined, cfg);
          const at = now + lookAhead;
          // The definition, summed suffix by suffix (what fastFigures did before it counted in one pass).
          let expected: ReturnType<typeof fastFigures> = null;
          if (fastWindowMs > 0) {
            const recent = prune(w, at, { ...cfg, windowMs: fastWindowMs });
            for (let i = recent.length - 1; i >= 0 && !expected; i--) {
              const f = figures(recent.slice(i), Number.MAX_SAFE_INTEGER - 1, {
                ...cfg,
                windowMs: Number.MAX_SAFE_INTEGER,
              });
              if (f.samples >= fastMinSamples) expected = f;
            }
          }
          assert.deepEqual(fastFigures(w, at, cfg), expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
