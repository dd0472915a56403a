import { bucketIndex, emptyHistogram, isFailure, type OutcomeCounts, type OutcomeKind, zeroCounts } from '../../breaker';
import type { OutcomeReport } from '../../messages/breaker';

/**
 * Outcomes seen for one key since the last report: counts, a latency histogram, the largest Retry-After seen
 * with failures, and the latest end of a wait a 429 asked for.
 */
export class ReportBuffer {
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
    this.counts[kind]++;
    this.size++;
    if (latencyMs !== undefined && kind !== 'neutral' && kind !== 'rate-limited') this.latency[bucketIndex(latencyMs)]!++;
    if (isFailure(kind)) {
      this.failed++;
      if (retryAfterMs) this.retryAfterMs = Math.max(this.retryAfterMs, retryAfterMs);
    }
    if (kind === 'rate-limited' && retryAfterMs) this.rateLimitedUntil = Math.max(this.rateLimitedUntil, now + retryAfterMs);
  }

  /** Transient failures for calls still in flight past the stall threshold (no latency: they have not ended). */
  addStalls(n: number): void {
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

  /** The report to send, and the buffer emptied. */
  take(reporter: string, now = Date.now()): OutcomeReport {
    const counts = Object.fromEntries(Object.entries(this.counts).filter(([, n]) => n > 0)) as Partial<OutcomeCounts>;
    const report: OutcomeReport = { reporter, counts };
    if (this.latency.some((n) => n > 0)) report.latency = this.latency;
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
