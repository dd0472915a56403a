import type { PolicyConfig } from './config';
import { addInto, emptyHistogram, percentile, totalOf } from './latency';
import { OUTCOME_KINDS, type OutcomeCounts, zeroCounts } from './outcome';
import { noteReporter, type ReporterSets } from './quorum';

/**
 * One bucket of the rolling window: outcomes whose report arrived in [start, start + bucketMs), and with a quorum
 * the reporters that sent them (quorum.ts).
 */
export interface WindowBucket extends ReporterSets {
  counts: OutcomeCounts;
  latency: number[];
}

/** Buckets in ascending start order; only buckets that saw something are kept. Plain JSON. */
export type RollingWindow = WindowBucket[];

/** What the window says now: the figures every rule reads and every trip record carries. */
export interface WindowFigures {
  successes: number;
  /** transient + service-exception */
  failures: number;
  transient: number;
  serviceException: number;
  permanent: number;
  neutral: number;
  rateLimited: number;
  /** successes + failures: the denominator of the failure ratio. */
  n: number;
  /** n + permanent: every health-relevant request; no rule trips below minSamples of these. */
  samples: number;
  /** failures / n, or 0 when n is 0. */
  failureRatio: number;
  latencySamples: number;
  /** p95 latency in ms, or null without latency samples. */
  p95Ms: number | null;
}

/** Drops buckets that have slid out of the window ending at `now`. Returns a new array. */
export function prune(window: RollingWindow, now: number, config: PolicyConfig): RollingWindow {
  const oldestKept = now - config.windowMs;
  return window.filter((b) => b.start + config.bucketMs > oldestKept);
}

/**
 * Adds counts and a latency histogram at `now` into the window, and with a quorum the reporter that sent them.
 * Returns a new window (input untouched).
 */
export function record(window: RollingWindow, now: number, counts: Partial<OutcomeCounts>, latency: readonly number[] | undefined, config: PolicyConfig, reporter?: string): RollingWindow {
  const start = Math.floor(now / config.bucketMs) * config.bucketMs;
  const pruned = prune(window, now, config);
  const last = pruned[pruned.length - 1];
  let bucket: WindowBucket;
  if (last && last.start === start) {
    bucket = { ...last, counts: { ...last.counts }, latency: [...last.latency] };
    pruned[pruned.length - 1] = bucket;
  } else {
    bucket = { start, counts: zeroCounts(), latency: emptyHistogram() };
    // Events arrive in workflow-time order, so a new bucket always goes last.
    pruned.push(bucket);
  }
  for (const kind of OUTCOME_KINDS) bucket.counts[kind] += counts[kind] ?? 0;
  if (latency) addInto(bucket.latency, latency);
  // A report that names no reporter counts as one anonymous reporter (so a lone tester still trips).
  noteReporter(bucket, reporter ?? '', counts, config);
  return pruned;
}

export function figures(window: RollingWindow, now: number, config: PolicyConfig): WindowFigures {
  return sum(prune(window, now, config));
}

/**
 * The fast window: the newest buckets, added newest first while they lie within fastWindowMs, up to the
 * first point where they hold fastMinSamples health-relevant samples. Null when they never do (or it is off).
 */
export function fastFigures(window: RollingWindow, now: number, config: PolicyConfig): WindowFigures | null {
  if (config.fastWindowMs === 0) return null;
  // Newest first, counting samples as it goes: one pass, so a 600-bucket fast window costs 600 additions per
  // report, not the 180,000 bucket sums of re-adding every suffix.
  const oldestKept = now - config.fastWindowMs;
  let samples = 0;
  for (let i = window.length - 1; i >= 0; i--) {
    const b = window[i]!;
    if (b.start + config.bucketMs <= oldestKept) break;
    const c = b.counts;
    samples += c.success + c.transient + c['service-exception'] + c.permanent;
    if (samples >= config.fastMinSamples) return sum(window.slice(i));
  }
  return null;
}

function sum(buckets: readonly WindowBucket[]): WindowFigures {
  const totals = zeroCounts();
  const latency = emptyHistogram();
  for (const bucket of buckets) {
    for (const kind of OUTCOME_KINDS) totals[kind] += bucket.counts[kind];
    addInto(latency, bucket.latency);
  }
  const failures = totals.transient + totals['service-exception'];
  const n = totals.success + failures;
  return {
    successes: totals.success,
    failures,
    transient: totals.transient,
    serviceException: totals['service-exception'],
    permanent: totals.permanent,
    neutral: totals.neutral,
    rateLimited: totals['rate-limited'],
    n,
    samples: n + totals.permanent,
    failureRatio: n === 0 ? 0 : failures / n,
    latencySamples: totalOf(latency),
    p95Ms: percentile(latency, 0.95),
  };
}
