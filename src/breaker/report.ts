/**
 * A reporter's outcome counts: recorded in the window, a Retry-After remembered or paced, and the trip rules
 * checked (or, in metrics-only half-open, the report taken as a shadow probe). Internal to the policy.
 */
import { fastWindowSpanMs } from './config';
import { maxCooldownMs } from './cooldown';
import { open, probeSucceeded, trialFailed } from './open-close';
import type { OutcomeCounts } from './outcome';
import { quorumFigures } from './quorum';
import type { Recorder } from './recorder';
import { floorsFor, quorumShortfall, shouldTrip } from './rules';
import type { PolicyEvent } from './state';
import { fastFigures, figures, record, recordSpread } from './window';

/** The `report` event. */
export type ReportEvent = Extract<PolicyEvent, { type: 'report' }>;

/** Applies a report: records it, then trips the breaker if a rule holds (or counts it as a shadow probe). */
export function onReport(out: Recorder, event: ReportEvent, rand: number): void {
  const s = out.state;
  const now = out.now;
  const { earlier } = event;
  let window = record(s.window, now, event.counts, event.latency, s.config, event.witness || event.reporter);
  if (earlier)
    window = recordSpread(window, now, earlier.counts, earlier.latency, earlier.fromAgoMs, earlier.toAgoMs, s.config);
  const failedOf = (c: Partial<OutcomeCounts>) => (c.transient ?? 0) + (c['service-exception'] ?? 0);
  const failed = failedOf(event.counts) + (earlier ? failedOf(earlier.counts) : 0);
  const hint =
    event.retryAfterMs && failed > 0
      ? Math.max(s.retryAfterHintUntil ?? 0, now + event.retryAfterMs)
      : s.retryAfterHintUntil;
  out.patch({ window, retryAfterHintUntil: hint });
  pace(out, event, failed);
  if (s.mode !== 'auto' && s.mode !== 'metrics-only') return;
  if (s.phase === 'closed') {
    const floors = floorsFor(s.config, event.concurrency);
    const f = figures(window, now, floors);
    const span = fastWindowSpanMs(floors, f.p95Ms, f.latencySamples);
    const fast = fastFigures(window, now, floors, span);
    const quorum = quorumFigures(window, now, floors, span);
    const verdict = shouldTrip(f, floors, fast, quorum);
    if (verdict) {
      const lowered =
        floors !== s.config
          ? ` (sample floors ${floors.minSamples}/${floors.fastMinSamples}: the fleet had ${event.concurrency} calls in flight)`
          : '';
      open(out, verdict.rule, verdict.detail + lowered, rand, verdict.figures);
    } else {
      const shortfall = quorumShortfall(f, floors, fast, quorum);
      if (shortfall) out.decline(shortfall);
    }
  } else if (s.phase === 'half-open' && s.mode === 'metrics-only') {
    // No probes run in metrics-only mode: each report stands in for one, so the shadow phase can recover.
    if (failed > 0) trialFailed(out, `shadow probe: ${failed} failures reported`, rand);
    else if ((event.counts.success ?? 0) + (earlier?.counts.success ?? 0) > 0)
      probeSucceeded(out, 'shadow probe: report with successes only');
  }
}

/**
 * A 429 asked to wait (or, with retryAfterPauses, a failure came with a Retry-After): the whole fleet pauses the
 * endpoint until then (the latest such time wins), whatever the phase, with no transition (a 429 counts as
 * rate-limited, a failure as the failure it is). Capped at the longest cooldown, so a server asking for a day
 * does not park the fleet for one.
 */
function pace(out: Recorder, event: ReportEvent, failed: number): void {
  const waits: number[] = [];
  if ((event.counts['rate-limited'] ?? 0) > 0) waits.push(event.rateLimitedForMs ?? 0);
  // A failure's Retry-After (a 503 asking to wait), in entities that pause on it.
  if (failed > 0 && out.state.config.retryAfterPauses) waits.push(event.retryAfterMs ?? 0);
  const ms = Math.max(0, ...waits.filter((w) => typeof w === 'number' && Number.isFinite(w)));
  if (!(ms > 0)) return;
  const until = out.now + Math.min(Math.round(ms), maxCooldownMs(out.state.config));
  if (until > (out.state.pacedUntil ?? 0)) out.patch({ pacedUntil: until });
}
