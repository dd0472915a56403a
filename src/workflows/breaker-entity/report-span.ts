import type { OutcomeCounts, SpanCounts } from '../../breaker';
import type { OutcomeReport } from '../../messages/breaker';

/** What a report adds to the window: the outcomes recorded at arrival, and the earlier ones spread over their span. */
export interface ReportParts {
  counts: Partial<OutcomeCounts>;
  latency?: number[];
  earlier?: SpanCounts;
}

/**
 * Splits a report into its recent part (`counts` less `earlier`) and its earlier part. A report's `counts` hold
 * everything (an entity from before `earlier` records them all at arrival); an `earlier` that does not make
 * sense (not finite, negative, a span that ends before it starts, more than `counts`) is clipped to what it
 * can mean, never thrown on: a signal handler must not fail the workflow task.
 */
export function splitReport(r: OutcomeReport): ReportParts {
  const counts = r.counts ?? {};
  const e = r.earlier;
  const whole: ReportParts = { counts, ...(r.latency ? { latency: r.latency } : {}) };
  if (!e || typeof e !== 'object' || !e.counts) return whole;
  const toAgoMs = Number(e.toAgoMs);
  const fromAgoMs = Number(e.fromAgoMs);
  if (!Number.isFinite(toAgoMs) || !Number.isFinite(fromAgoMs) || toAgoMs < 0 || fromAgoMs < toAgoMs) return whole;
  const recent: Partial<OutcomeCounts> = {};
  const earlier: Partial<OutcomeCounts> = {};
  for (const [kind, n] of Object.entries(counts) as [keyof OutcomeCounts, number][]) {
    const before = Math.min(n, Math.max(0, Number(e.counts[kind]) || 0));
    if (before > 0) earlier[kind] = before;
    if (n - before > 0) recent[kind] = n - before;
  }
  const parts: ReportParts = { counts: recent, earlier: { counts: earlier, fromAgoMs, toAgoMs } };
  if (r.latency) {
    const el = Array.isArray(e.latency) ? e.latency : [];
    const before = r.latency.map((n, i) => Math.min(n, Math.max(0, Number(el[i]) || 0)));
    parts.latency = r.latency.map((n, i) => n - before[i]!);
    if (before.some((n) => n > 0)) parts.earlier!.latency = before;
  }
  return parts;
}
