import { metricMeter } from '@temporalio/workflow';
import type { BreakerStateName, PolicyEvent, StepResult, TransitionReason, TransitionRecord } from '../../breaker';
import { CLOSE_REASONS, METRIC, OPEN_REASONS, TRIP_REASONS } from '../../messages/metrics';

/**
 * What the entity counts, fleet-wide: the workflow's metric meter goes through a sink the SDK skips on
 * replay, and it adds no command, so each transition is counted once (by the worker that ran the workflow
 * task; at least once if that task failed after the sink ran and was retried elsewhere) and no patch is needed.
 */
export interface EntityMetricSink {
  count(name: string, value: number, labels: Record<string, string>): void;
}

/** The workflow's own meter (a no-op in a worker with no telemetry installed). */
export const workflowMetricSink: EntityMetricSink = {
  count(name, value, labels) {
    metricMeter.createCounter(name).add(value, labels);
  },
};

/** Open or forced open: time in these states is the open time. */
export function isOpenState(s: BreakerStateName): boolean {
  return s === 'open' || s === 'forced-open';
}

/** Open, half-open or forced open: the guard refuses ordinary traffic. */
export function isRefusingState(s: BreakerStateName): boolean {
  return s === 'half-open' || isOpenState(s);
}

/**
 * A trip: the rules opened a closed breaker. A failed probe (half-open -> open) is no trip, so one long outage
 * trips once however many probes fail, and trips over a window count open/closed cycles.
 */
export function isTrip(t: Pick<TransitionRecord, 'from' | 'to' | 'shadow'>): boolean {
  return !t.shadow && t.from === 'closed' && t.to === 'open';
}

/** A close: a breaker that refused traffic lets it through again (probes succeeded, or an operator's action). */
export function isClose(t: Pick<TransitionRecord, 'from' | 'to' | 'shadow'>): boolean {
  return !t.shadow && isRefusingState(t.from) && !isRefusingState(t.to);
}

/** The `reason` label of an open: the policy's reason, `forced-open` shortened to `forced` (others as named). */
export function openReasonLabel(reason: TransitionReason): string {
  return reason === 'forced-open' ? 'forced' : reason;
}

/**
 * Transitions, opens (with their reason), trips and closes (open/closed cycles: flapping), whole seconds spent open or forced open, and probe outcomes of one
 * entity. Shadow transitions (metrics-only mode: nothing was blocked) are not counted. The open time is added
 * when the breaker leaves open; the sub-second remainder is kept in this run's memory (replay rebuilds it), so
 * a continue-as-new loses less than a second, and carries nothing new.
 */
export class EntityMetrics {
  /** When the current open stretch began; null when not open. */
  private openSince: number | null;
  private remainderMs = 0;

  constructor(
    private readonly key: string,
    state: BreakerStateName,
    /** The transition log, most recent first (carried across continue-as-new). */
    history: readonly TransitionRecord[],
    fallbackOpenedAt: number | null,
    now: number,
    private readonly sink: EntityMetricSink = workflowMetricSink,
  ) {
    this.openSince = isOpenState(state) ? (openedAtFromLog(history) ?? fallbackOpenedAt ?? now) : null;
  }

  /**
   * Every series of this endpoint at zero, once per run: Prometheus' increase() misses a counter's first
   * step when its series starts above zero, so the series exist before the first open.
   */
  zero(): void {
    const endpoint = this.key;
    for (const reason of OPEN_REASONS) this.sink.count(METRIC.circuitOpen, 0, { endpoint, reason });
    for (const reason of TRIP_REASONS) this.sink.count(METRIC.circuitTrips, 0, { endpoint, reason });
    for (const reason of CLOSE_REASONS) this.sink.count(METRIC.circuitCloses, 0, { endpoint, reason });
    this.sink.count(METRIC.openSeconds, 0, { endpoint });
    for (const outcome of ['success', 'failure']) this.sink.count(METRIC.probes, 0, { endpoint, outcome });
  }

  /** What one applied event changed (transitions in the order they happened). */
  applied(event: PolicyEvent, out: StepResult): void {
    for (const t of out.transitions) this.transition(t);
    if (event.type === 'probe-result' && out.ignored === undefined) {
      // A slow success is a failed probe (k-of-n: even when the round goes on); neutral answers say nothing.
      const failed = out.trial === 'failure' || out.transitions.some((t) => t.reason === 'probe-failed');
      const outcome = failed ? 'failure' : event.outcome === 'success' ? 'success' : null;
      if (outcome) this.sink.count(METRIC.probes, 1, { endpoint: this.key, outcome });
    }
  }

  /** A signal the entity refused (its payload failed the checks in src/messages/breaker-validation.ts). */
  refused(signal: string): void {
    this.sink.count(METRIC.signalsRefused, 1, { endpoint: this.key, signal });
  }

  private transition(t: TransitionRecord): void {
    if (t.shadow) return;
    const endpoint = this.key;
    this.sink.count(METRIC.transitions, 1, { endpoint, from: t.from, to: t.to });
    if (isTrip(t)) this.sink.count(METRIC.circuitTrips, 1, { endpoint, reason: t.reason });
    if (isClose(t)) this.sink.count(METRIC.circuitCloses, 1, { endpoint, reason: t.reason });
    const was = isOpenState(t.from);
    const is = isOpenState(t.to);
    if (!was && is) {
      this.openSince = t.at;
      this.sink.count(METRIC.circuitOpen, 1, { endpoint, reason: openReasonLabel(t.reason) });
    } else if (was && !is) {
      const ms = Math.max(0, t.at - (this.openSince ?? t.at)) + this.remainderMs;
      this.remainderMs = ms % 1000;
      this.openSince = null;
      const seconds = Math.floor(ms / 1000);
      if (seconds > 0) this.sink.count(METRIC.openSeconds, seconds, { endpoint });
    }
  }
}

/** When the open stretch the log ends in began: its latest transition into open from outside it. */
function openedAtFromLog(history: readonly TransitionRecord[]): number | null {
  for (const t of history) {
    if (t.shadow) continue;
    if (!isOpenState(t.to)) return null;
    if (!isOpenState(t.from)) return t.at;
  }
  return null;
}
