/**
 * Latency as a fixed histogram, so a window can hold p95 without storing samples and reports from many
 * workers merge by adding counts. Bucket upper bounds run from 1 ms to 100 s, ten per decade
 * (1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8 x 10^k), plus one overflow bucket; a percentile read from it
 * is interpolated inside its bucket; buckets are at most 1.28x wide, so its error is under 30 %.
 */
const STEPS = [1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8];

/** Upper bounds (ms) of every bucket but the last, which holds everything above 100 s. */
export const LATENCY_BOUNDS_MS: readonly number[] = Object.freeze([
  ...[0, 1, 2, 3, 4].flatMap((decade) => STEPS.map((s) => Math.round(s * 10 ** decade * 100) / 100)),
  100_000,
]);

/** Number of counters in a latency histogram (bounds plus overflow). */
export const LATENCY_BUCKETS = LATENCY_BOUNDS_MS.length + 1;

/** Counts per bucket; index i counts samples in (bound[i-1], bound[i]]. */
export type LatencyHistogram = number[];

export function emptyHistogram(): LatencyHistogram {
  return new Array<number>(LATENCY_BUCKETS).fill(0);
}

export function bucketIndex(latencyMs: number): number {
  // Linear scan is fine: 51 bounds, and this runs per sample in activities, not per event in workflows.
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) {
    if (latencyMs <= LATENCY_BOUNDS_MS[i]!) return i;
  }
  return LATENCY_BOUNDS_MS.length;
}

/** Builds a histogram from raw samples (what a worker does before reporting a batch). */
export function histogramOf(samplesMs: Iterable<number>): LatencyHistogram {
  const histogram = emptyHistogram();
  for (const ms of samplesMs) histogram[bucketIndex(ms)]!++;
  return histogram;
}

/** Adds `from` into `into` (mutates `into`); a shorter or longer `from` is added index by index. */
export function addInto(into: LatencyHistogram, from: readonly number[]): void {
  const n = Math.min(into.length, from.length);
  for (let i = 0; i < n; i++) into[i]! += from[i]!;
}

export function totalOf(histogram: readonly number[]): number {
  let total = 0;
  for (const c of histogram) total += c;
  return total;
}

/**
 * How many samples took longer than `thresholdMs`, interpolated linearly inside the bucket the threshold falls
 * in (as percentile does); the overflow bucket counts whole above the last bound.
 */
export function countAbove(histogram: readonly number[], thresholdMs: number): number {
  let above = 0;
  for (let i = 0; i < histogram.length; i++) {
    const count = histogram[i]!;
    if (count === 0) continue;
    const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
    const upper = i < LATENCY_BOUNDS_MS.length ? LATENCY_BOUNDS_MS[i]! : Number.POSITIVE_INFINITY;
    if (lower >= thresholdMs) above += count;
    else if (upper > thresholdMs)
      above += upper === Number.POSITIVE_INFINITY ? count : (count * (upper - thresholdMs)) / (upper - lower);
  }
  return above;
}

/**
 * The q-quantile (0 < q <= 1) in ms, interpolated linearly inside the bucket that holds it;
 * `null` for an empty histogram. The overflow bucket reports the last bound.
 */
export function percentile(histogram: readonly number[], q: number): number | null {
  const total = totalOf(histogram);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    const count = histogram[i]!;
    if (count === 0) continue;
    if (seen + count >= rank) {
      if (i >= LATENCY_BOUNDS_MS.length) return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
      const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      const upper = LATENCY_BOUNDS_MS[i]!;
      return lower + ((rank - seen) / count) * (upper - lower);
    }
    seen += count;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
}

/** Mean absolute deviations of healthy latency a call may wait beyond the p95 before it counts as stalled. */
export const STALL_DEVIATIONS = 4;

/**
 * How long a call may stay in flight before it counts as stalled, given an endpoint's healthy latency: its
 * p95 plus a margin of `deviations` mean absolute deviations, and at least half the p95. The margin follows
 * how much the latency varies, not how long it is: a renderer that takes 1-3 s is judged after about 5 s
 * (4 x p95 would wait 12 s). The half-p95 least keeps a steady endpoint's threshold clear of a pause that
 * delays every call in flight at once (a garbage collection, a failover) by a fraction of a render.
 */
export function stallAfterMs(p95Ms: number, meanDeviationMs: number, deviations = STALL_DEVIATIONS): number {
  return p95Ms + Math.max(deviations * meanDeviationMs, p95Ms / 2);
}

/**
 * stallAfterMs of the samples in a histogram (each taken at its bucket's middle), or null with fewer than
 * `minSamples`: what the fleet's window says when a worker has not yet seen enough calls of its own.
 */
export function stallAfterOfHistogram(
  histogram: readonly number[],
  minSamples: number,
  deviations = STALL_DEVIATIONS,
): number | null {
  const total = totalOf(histogram);
  const p95 = percentile(histogram, 0.95);
  if (total < Math.max(1, minSamples) || p95 === null) return null;
  const mid = (i: number) => {
    const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
    return i < LATENCY_BOUNDS_MS.length ? (lower + LATENCY_BOUNDS_MS[i]!) / 2 : lower;
  };
  let sum = 0;
  histogram.forEach((c, i) => (sum += c * mid(i)));
  const mean = sum / total;
  let dev = 0;
  histogram.forEach((c, i) => (dev += c * Math.abs(mid(i) - mean)));
  return stallAfterMs(p95, dev / total, deviations);
}
