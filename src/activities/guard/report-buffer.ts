import {
  bucketIndex,
  emptyHistogram,
  isFailure,
  type OutcomeCounts,
  type OutcomeKind,
  zeroCounts,
} from '../../breaker';
import type { OutcomeReport } from '../../messages/breaker';

/**
 * Outcomes seen for one key since the last report: counts, a latency histogram, the largest Retry-After seen
 * with failures, and the latest end of a wait a 429 asked for. A buffer held longer than `recentMs` (a worker
 * of a large fleet reports every few seconds) keeps its older outcomes apart: the report says when they
 * happened (`earlier`, spread over their span by the entity), and the failure share that calls for a report at
 * once is read over the recent ones only, so a long run of successes does not hide a fresh outage.
 */
export class ReportBuffer {
  /** Everything buffered up to the last seal (a subset of the totals), and when its first and last outcome came. */
  private sealed: {
    counts: OutcomeCounts;
    latency: number[];
    size: number;
    failed: number;
    from: number;
    to: number;
  } | null = null;
  /** When the first outcome since the last seal came (0: none yet), and the latest. */
  private recentFrom = 0;
  private lastAt = 0;

  constructor(private readonly recentMs = Number.POSITIVE_INFINITY) {}

  private counts: OutcomeCounts = zeroCounts();
  private latency = emptyHistogram();
  private retryAfterMs = 0;
  private size = 0;
  private failed = 0;
  private stalls = 0;
  /** When the longest wait a 429 asked for ends (this process's clock), 0 if none: sent as ms from the report. */
  private rateLimitedUntil = 0;

  add(kind: OutcomeKind, latencyMs: number | undefined, retryAfterMs?: number, now = Date.now()): void {
    // The worker's own failure never reached the endpoint: nothing to tell its breaker (the guard's quarantine counts it).
    if (kind === 'local') return;
    this.arrive(now);
    this.counts[kind]++;
    this.size++;
    if (latencyMs !== undefined && kind !== 'neutral' && kind !== 'rate-limited')
      this.latency[bucketIndex(latencyMs)]!++;
    if (isFailure(kind)) {
      this.failed++;
      if (retryAfterMs) this.retryAfterMs = Math.max(this.retryAfterMs, retryAfterMs);
    }
    if (kind === 'rate-limited' && retryAfterMs)
      this.rateLimitedUntil = Math.max(this.rateLimitedUntil, now + retryAfterMs);
  }

  /** Transient failures for calls still in flight past the stall threshold (no latency: they have not ended). */
  addStalls(n: number, now = Date.now()): void {
    this.arrive(now);
    this.counts.transient += n;
    this.size += n;
    this.failed += n;
    this.stalls += n;
  }

  get empty(): boolean {
    return this.size === 0;
  }

  /** Outcomes buffered since the last report. */
  get outcomes(): number {
    return this.size;
  }

  get failures(): number {
    return this.failed;
  }

  /** Whether a quarter or more of the outcomes since the last seal (at most recentMs of them) failed. */
  recentlyFailing(now = Date.now()): boolean {
    this.sealIfOld(now);
    const outcomes = this.size - (this.sealed?.size ?? 0);
    const failed = this.failed - (this.sealed?.failed ?? 0);
    return failed > 0 && failed * 4 >= outcomes;
  }

  /** Outcomes held longer than recentMs become the earlier part; then this one starts the recent part. */
  private arrive(now: number): void {
    this.sealIfOld(now);
    if (!this.recentFrom) this.recentFrom = now;
    this.lastAt = now;
  }

  private sealIfOld(now: number): void {
    if (!this.recentFrom || now - this.recentFrom < this.recentMs) return;
    this.sealed = {
      counts: { ...this.counts },
      latency: [...this.latency],
      size: this.size,
      failed: this.failed,
      from: this.sealed?.from ?? this.recentFrom,
      to: this.lastAt,
    };
    this.recentFrom = 0;
  }

  /** The report to send, and the buffer emptied. */
  take(reporter: string, now = Date.now()): OutcomeReport {
    const counts = Object.fromEntries(Object.entries(this.counts).filter(([, n]) => n > 0)) as Partial<OutcomeCounts>;
    const report: OutcomeReport = { reporter, counts };
    if (this.latency.some((n) => n > 0)) report.latency = this.latency;
    this.sealIfOld(now);
    // Only a buffer held for two recent spans or more has an earlier part worth spreading: a worker reporting at
    // the plain interval sends everything as recent, as before spacing.
    if (this.sealed && now - this.sealed.from >= 2 * this.recentMs) {
      const { counts: c, latency, from, to } = this.sealed;
      const earlier = Object.fromEntries(Object.entries(c).filter(([, n]) => n > 0)) as Partial<OutcomeCounts>;
      report.earlier = { counts: earlier, fromAgoMs: Math.max(0, now - from), toAgoMs: Math.max(0, now - to) };
      if (latency.some((n) => n > 0)) report.earlier.latency = latency;
    }
    this.sealed = null;
    this.recentFrom = 0;
    if (this.retryAfterMs) report.retryAfterMs = this.retryAfterMs;
    // What is left of the wait when the report goes: the batch may have waited up to a report interval.
    if (this.rateLimitedUntil > now) report.rateLimitedForMs = this.rateLimitedUntil - now;
    this.rateLimitedUntil = 0;
    if (this.stalls) report.stalled = this.stalls;
    this.stalls = 0;
    this.counts = zeroCounts();
    this.latency = emptyHistogram();
    this.retryAfterMs = 0;
    this.size = 0;
    this.failed = 0;
    return report;
  }
}
