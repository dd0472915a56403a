import { latencyBudgetMs, slowCallMs, type PolicyConfig } from './config';
import type { QuorumFigures } from './quorum';
import type { WindowFigures } from './window';

/** Why a closed breaker trips. */
export type TripRule = 'failure-ratio' | 'latency' | 'slow-calls' | 'permanent-surge';

export interface TripVerdict {
  rule: TripRule;
  detail: string;
  /** The figures of the window that tripped (the fast window's when it was the one). */
  figures: WindowFigures;
}

/**
 * The tripping rule, all of it: a closed breaker opens when
 *   failures / n >= failureRatio with n >= minSamples, or
 *   p95 latency > budget with >= latencyMinSamples latency samples, or
 *   calls slower than slowCallMs >= slowCallRatio of >= latencyMinSamples latency samples, or
 *   permanent faults >= permanentSurgeCount and >= permanentSurgeRatio of all samples,
 * and never while the window holds fewer than minSamples health-relevant samples. The failure-ratio rule
 * runs over the whole window and over the fast window (`fast`: the newest fastMinSamples samples, within
 * fastWindowMs, or the span fastWindowSpanMs gives; see window.ts). With a quorum (`quorum`: quorum.ts) each
 * failure-ratio rule also needs that many failing reporters: within the fast window's span for the fast
 * window, within the window for the whole; and the
 * slow-call rule that many reporters whose own calls were slow.
 */
export function shouldTrip(
  f: WindowFigures,
  config: PolicyConfig,
  fast: WindowFigures | null = null,
  quorum: QuorumFigures | null = null,
): TripVerdict | null {
  if (fast && ratioTrips(fast, config) && (!quorum || quorum.fastFailing >= quorum.required)) {
    return {
      rule: 'failure-ratio',
      detail: `${ratioDetail(fast, config)} in the newest ${fast.samples} samples${quorumDetail(quorum, 'fast')}`,
      figures: fast,
    };
  }
  if (f.samples < config.minSamples) return null;
  if (ratioTrips(f, config) && (!quorum || quorum.failing >= quorum.required))
    return { rule: 'failure-ratio', detail: ratioDetail(f, config) + quorumDetail(quorum, 'whole'), figures: f };
  const budget = latencyBudgetMs(config);
  if (budget !== null && f.p95Ms !== null && f.latencySamples >= config.latencyMinSamples && f.p95Ms > budget) {
    return {
      rule: 'latency',
      detail: `p95 ${Math.round(f.p95Ms)} ms > budget ${Math.round(budget)} ms over ${f.latencySamples} samples`,
      figures: f,
    };
  }
  if (slowHolds(f, config) && (!quorum || quorum.slow >= quorum.required)) {
    const n = quorum?.slow ?? 0;
    const witnesses = quorum ? `; slow for ${n} reporter${n === 1 ? '' : 's'} (quorum ${quorum.required})` : '';
    return { rule: 'slow-calls', detail: slowDetail(f, config) + witnesses, figures: f };
  }
  if (f.permanent >= config.permanentSurgeCount && f.permanent / f.samples >= config.permanentSurgeRatio) {
    return {
      rule: 'permanent-surge',
      detail: `${f.permanent}/${f.samples} permanent faults (>= ${config.permanentSurgeCount} and ${pct(config.permanentSurgeRatio)})`,
      figures: f,
    };
  }
  return null;
}

/**
 * Why a failure-ratio rule that holds did not trip: its failures came from fewer reporters than the quorum
 * needs ("quorum not met: failures from 1 reporter ..."). Null when no ratio rule holds, or the quorum is met
 * or off. Read only when shouldTrip said no.
 */
export function quorumShortfall(
  f: WindowFigures,
  config: PolicyConfig,
  fast: WindowFigures | null,
  quorum: QuorumFigures | null,
): string | null {
  if (!quorum) return null;
  const which =
    fast && ratioTrips(fast, config)
      ? { figures: fast, failing: quorum.fastFailing, where: `in the newest ${fast.samples} samples` }
      : null;
  const whole =
    f.samples >= config.minSamples && ratioTrips(f, config)
      ? { figures: f, failing: quorum.failing, where: 'in the window' }
      : null;
  const held = which ?? whole;
  if (!held) {
    // The slow-call rule has the same quorum: one worker on a congested link must not open the fleet's breaker.
    if (f.samples < config.minSamples || !slowHolds(f, config) || quorum.slow >= quorum.required) return null;
    const n = quorum.slow;
    return `quorum not met: slow calls from ${n} reporter${n === 1 ? '' : 's'} (${quorum.required} needed); ${slowDetail(f, config)} in the window`;
  }
  if (held.failing >= quorum.required) return null;
  const n = held.failing;
  return `quorum not met: failures from ${n} reporter${n === 1 ? '' : 's'} (${quorum.required} needed); ${ratioDetail(held.figures, config)} ${held.where}`;
}

function quorumDetail(q: QuorumFigures | null, which: 'fast' | 'whole'): string {
  if (!q) return '';
  const n = which === 'fast' ? q.fastFailing : q.failing;
  return `; failures from ${n} reporter${n === 1 ? '' : 's'} (quorum ${q.required})`;
}

/**
 * The sample floors in force. A floor the traffic cannot reach never protects anything: a single worker with
 * 8 calls in flight to a hanging server produces 8 outcomes per timeout, never minSamples 20 in the fast
 * window. So when the fleet's concurrency (the calls its workers had in flight, as they report it) is below
 * a floor, the floor comes down to it, but never below volumeFloor. Unknown concurrency, or volumeFloor null:
 * the configured floors.
 */
export function floorsFor(config: PolicyConfig, concurrency: number | undefined): PolicyConfig {
  const { volumeFloor } = config;
  if (concurrency === undefined || !Number.isFinite(concurrency) || volumeFloor === null) return config;
  // Below volumeFloor's reach, the floor is what the fleet can produce (never below smallFleetFloor).
  const small = config.smallFleetFloor;
  const floor = small !== null && concurrency < volumeFloor ? Math.max(small, Math.ceil(concurrency)) : volumeFloor;
  const cap = Math.max(floor, Math.ceil(concurrency));
  if (cap >= config.fastMinSamples) return config;
  const minSamples = Math.min(config.minSamples, cap);
  return { ...config, minSamples, fastMinSamples: Math.max(minSamples, cap) };
}

/** The slow-call rule holds on `f` (before any quorum). */
function slowHolds(f: WindowFigures, config: PolicyConfig): boolean {
  return (
    slowCallMs(config) !== null &&
    f.slowCalls !== undefined &&
    f.latencySamples >= config.latencyMinSamples &&
    f.slowCalls / f.latencySamples >= config.slowCallRatio
  );
}

function slowDetail(f: WindowFigures, config: PolicyConfig): string {
  const slow = f.slowCalls ?? 0;
  return `${Math.round(slow)}/${f.latencySamples} calls slower than ${Math.round(slowCallMs(config) ?? 0)} ms (${pct(slow / f.latencySamples)} >= ${pct(config.slowCallRatio)})`;
}

function ratioTrips(f: WindowFigures, config: PolicyConfig): boolean {
  return f.samples >= config.minSamples && f.n >= config.minSamples && f.failureRatio >= config.failureRatio;
}

function ratioDetail(f: WindowFigures, config: PolicyConfig): string {
  return `${f.failures}/${f.n} failed (${pct(f.failureRatio)} >= ${pct(config.failureRatio)}; ${f.transient} transient, ${f.serviceException} service-exception)`;
}

function pct(x: number): string {
  return `${Math.round(x * 1000) / 10}%`;
}
