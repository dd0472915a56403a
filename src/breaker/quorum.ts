/**
 * The quorum of the ratio rules: the fleet's breaker opens on a failure ratio only when the failures come from
 * at least `quorum` distinct reporters (or every active one, when fewer are active), so one worker whose own
 * network fails cannot open the breaker for a fleet that is being served.
 *
 * Each window bucket keeps the reporters it heard from and those whose report was failing (its own failure
 * ratio at half the policy's failureRatio or above), as 32-bit hashes of their ids, at most `quorum` of each: the
 * question is only ever "at least q?", and a bucket holding q answers it alone, while one holding fewer holds
 * them all, so the union of capped sets is exact up to q. The carried state stays bounded (window-pack.ts).
 */
import { slowCallMs, type PolicyConfig } from './config';
import { countAbove, totalOf } from './latency';

/** What a window bucket keeps of its reporters (window.ts's WindowBucket has these fields). */
export interface ReporterSets {
  start: number;
  /** Hashes of the reporters heard from in this bucket, at most `quorum`. */
  seen?: number[];
  /** Hashes of the reporters whose report here was failing, at most `quorum`. */
  failing?: number[];
  /** Hashes of the reporters whose report here was slow (the slow-call rule's witnesses), at most `quorum`. */
  slow?: number[];
}

/** Reporters heard from within this long (or the window, if shorter) are the active ones. Guards report every second. */
export const QUORUM_ACTIVE_MS = 5_000;

/** What the quorum stands at `now`: how many reporters must be failing, and how many are. */
export interface QuorumFigures {
  /** Failing reporters the ratio rules need: quorum, or every active reporter when fewer are active (at least 1). */
  required: number;
  /** Distinct reporters that sent a failing report within the window (capped at quorum). */
  failing: number;
  /** Distinct reporters that sent a failing report within the fast window's span (capped at quorum). */
  fastFailing: number;
  /** Distinct reporters heard from within QUORUM_ACTIVE_MS (capped at quorum). */
  active: number;
  /** Distinct reporters that sent a slow report within the window (capped at quorum; 0 with no slow-call rule). */
  slow: number;
}

/** The quorum in force (1: off). */
export function quorumOf(config: PolicyConfig): number {
  return config.quorum;
}

/** FNV-1a over the id's UTF-16 code units: a stable 32-bit number, the same in every run and replay. */
export function reporterHash(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** `set` with `h` added, at most `cap` long (a new array; `set` untouched). */
export function withReporter(set: readonly number[] | undefined, h: number, cap: number): number[] {
  const out = set ? [...set] : [];
  if (out.length < cap && !out.includes(h)) out.push(h);
  return out;
}

/** The union of two capped sets, capped at `cap`. */
export function unionCapped(
  a: readonly number[] | undefined,
  b: readonly number[] | undefined,
  cap: number,
): number[] | undefined {
  if (!a?.length) return b?.length ? b.slice(0, cap) : undefined;
  let out = a.slice(0, cap);
  for (const h of b ?? []) out = withReporter(out, h, cap);
  return out;
}

/**
 * Records a report from `reporter` into `bucket` (mutated: record() hands it a fresh copy). Only a report with
 * successes or failures makes its reporter active: one that saw nothing health-relevant vouches for nothing.
 */
export function noteReporter(
  bucket: ReporterSets,
  reporter: string,
  counts: ReportCounts,
  config: PolicyConfig,
  latency?: readonly number[],
): void {
  const q = quorumOf(config);
  if (q <= 1) return;
  const failed = (counts.transient ?? 0) + (counts['service-exception'] ?? 0);
  const n = failed + (counts.success ?? 0);
  if (n === 0) return;
  // Failing: its own failure ratio reaches half the policy's. A healthy worker's stray failure (1 in 10) does
  // not make it a second witness for a sick one; a worker in an outage that still gets some answers does.
  const failing = failed > 0 && failed / n >= config.failureRatio / 2;
  const h = reporterHash(reporter);
  bucket.seen = withReporter(bucket.seen, h, q);
  if (failing) bucket.failing = withReporter(bucket.failing, h, q);
  // Slow: its own share of calls slower than slowCallMs reaches half the policy's slowCallRatio.
  const slowMs = slowCallMs(config);
  const timed = latency ? totalOf(latency) : 0;
  if (slowMs !== null && latency && timed > 0 && countAbove(latency, slowMs) / timed >= config.slowCallRatio / 2)
    bucket.slow = withReporter(bucket.slow, h, q);
}

/** The quorum's figures at `now`, or null when the quorum is off (1). */
export function quorumFigures(
  window: readonly ReporterSets[],
  now: number,
  config: PolicyConfig,
  fastSpanMs = config.fastWindowMs,
): QuorumFigures | null {
  const q = quorumOf(config);
  if (q <= 1) return null;
  const activeFrom = now - Math.min(config.windowMs, QUORUM_ACTIVE_MS);
  // The fast window's reporters over the fast window's own reach (fastWindowSpanMs).
  const fastFrom = now - fastSpanMs;
  const windowFrom = now - config.windowMs;
  let failing: number[] | undefined;
  let fast: number[] | undefined;
  let active: number[] | undefined;
  let slow: number[] | undefined;
  for (const b of window) {
    const end = b.start + config.bucketMs;
    if (end <= windowFrom) continue;
    failing = unionCapped(failing, b.failing, q);
    slow = unionCapped(slow, b.slow, q);
    if (end > fastFrom) fast = unionCapped(fast, b.failing, q);
    if (end > activeFrom) active = unionCapped(active, b.seen, q);
  }
  const a = active?.length ?? 0;
  return {
    required: Math.max(1, Math.min(q, a)),
    failing: failing?.length ?? 0,
    fastFailing: fast?.length ?? 0,
    active: a,
    slow: slow?.length ?? 0,
  };
}

/** The counts of a report the quorum reads. */
export interface ReportCounts {
  success?: number;
  transient?: number;
  'service-exception'?: number;
}
