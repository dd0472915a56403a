import { slowCallMs, type PolicyConfig } from './config';
import { addInto, countAbove, emptyHistogram, percentile, totalOf, type LatencyHistogram } from './latency';
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
  /** Latency samples slower than slowCallMs (interpolated in its histogram bucket); absent when the rule is off. */
  slowCalls?: number;
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
export function record(
  window: RollingWindow,
  now: number,
  counts: Partial<OutcomeCounts>,
  latency: readonly number[] | undefined,
  config: PolicyConfig,
  reporter?: string,
): RollingWindow {
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
  noteReporter(bucket, reporter ?? '', counts, config, latency);
  return pruned;
}

/**
 * Adds outcomes that happened over the span [now - fromAgoMs, now - toAgoMs], spread evenly over the buckets
 * of that span. A worker that reports every 30 s sends 30 s of successes at once: recorded at arrival they
 * would pile into the current bucket (the fast window would read 30 s of traffic as its last second, and a
 * failure ratio there would be diluted by it) and outlive the window by the span. The part of the span older
 * than the window is dropped in proportion (it would have slid out by now). Counts stay integers: each slot
 * gets its floor share, the remainder goes to the newest slots. Returns a new window (input untouched).
 */
export function recordSpread(
  window: RollingWindow,
  now: number,
  counts: Partial<OutcomeCounts>,
  latency: readonly number[] | undefined,
  fromAgoMs: number,
  toAgoMs: number,
  config: PolicyConfig,
): RollingWindow {
  const to = Math.min(Math.max(0, toAgoMs), config.windowMs);
  const from = Math.max(fromAgoMs, to);
  const kept = Math.min(from, config.windowMs);
  const share = from > to ? (kept - to) / (from - to) : 1;
  const first = Math.floor((now - kept) / config.bucketMs) * config.bucketMs;
  const last = Math.floor((now - to) / config.bucketMs) * config.bucketMs;
  const slots = (last - first) / config.bucketMs + 1;
  const byStart = new Map(
    prune(window, now, config).map((b) => [b.start, { ...b, counts: { ...b.counts }, latency: [...b.latency] }]),
  );
  const bucketAt = (start: number): WindowBucket => {
    let b = byStart.get(start);
    if (!b) byStart.set(start, (b = { start, counts: zeroCounts(), latency: emptyHistogram() }));
    return b;
  };
  // Slot i of `slots` gets floor(c / slots), and one more when it is among the newest (c mod slots).
  const spread = (c: number, add: (b: WindowBucket, n: number) => void) => {
    const total = Math.round(c * share);
    const each = Math.floor(total / slots);
    const rest = total - each * slots;
    for (let i = 0; i < slots; i++) {
      const n = each + (i >= slots - rest ? 1 : 0);
      if (n > 0) add(bucketAt(first + i * config.bucketMs), n);
    }
  };
  for (const kind of OUTCOME_KINDS) spread(counts[kind] ?? 0, (b, n) => (b.counts[kind] += n));
  latency?.forEach((c, j) => spread(c, (b, n) => (b.latency[j] = (b.latency[j] ?? 0) + n)));
  return prune(
    [...byStart.values()].sort((a, b) => a.start - b.start),
    now,
    config,
  );
}

/** The latency histogram of the window's calls at `now`. */
export function windowLatency(window: RollingWindow, now: number, config: PolicyConfig): LatencyHistogram {
  const latency = emptyHistogram();
  for (const bucket of prune(window, now, config)) addInto(latency, bucket.latency);
  return latency;
}

export function figures(window: RollingWindow, now: number, config: PolicyConfig): WindowFigures {
  return sum(prune(window, now, config), slowCallMs(config));
}

/**
 * The fast window: the newest buckets, added newest first while they lie within `spanMs` (fastWindowMs unless
 * the caller widens it: fastWindowSpanMs), up to the first point where they hold fastMinSamples
 * health-relevant samples. Null when they never do (or it is off).
 */
export function fastFigures(
  window: RollingWindow,
  now: number,
  config: PolicyConfig,
  spanMs = config.fastWindowMs,
): WindowFigures | null {
  if (config.fastWindowMs === 0) return null;
  // Newest first, counting samples as it goes: one pass, so a 600-bucket fast window costs 600 additions per
  // report, not the 180,000 bucket sums of re-adding every suffix.
  const oldestKept = now - spanMs;
  let samples = 0;
  for (let i = window.length - 1; i >= 0; i--) {
    const b = window[i]!;
    if (b.start + config.bucketMs <= oldestKept) break;
    const c = b.counts;
    samples += c.success + c.transient + c['service-exception'] + c.permanent;
    if (samples >= config.fastMinSamples) return sum(window.slice(i), slowCallMs(config));
  }
  return null;
}

function sum(buckets: readonly WindowBucket[], slowMs: number | null): WindowFigures {
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
    ...(slowMs !== null ? { slowCalls: Math.round(countAbove(latency, slowMs) * 100) / 100 } : {}),
  };
}
