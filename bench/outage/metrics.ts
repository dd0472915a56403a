import type { TransitionRecord } from '../../src/breaker';
import type { ModeRecorder } from './recorder';
import { SERVER_PHASES, type ModeName, type Scenario, type Schedule, type ServerStats } from './types';

/** Views that mean "this worker knows its breaker is not closed". */
const TRIP_VIEWS = new Set(['opened', 'half-open', 'refused', 'probe']);

/** Share of the healthy warm-up rate that counts as "full traffic" again. */
export const FULL_TRAFFIC_SHARE = 0.9;
/** The trailing window the recovered rate is measured over. */
export const RATE_WINDOW_MS = 1_000;

/** Every figure the report prints for one mode, all measured in its run. */
export interface ModeFigures {
  mode: ModeName;
  schedule: Schedule;
  wallMs: number;
  totalAttempts: number;
  serverTotal: number;
  /** Client-side attempts started in [outageAt, recoverAt), plus the entity's own probes the server saw then. */
  outageRequests: number;
  clientOutageAttempts: number;
  /** The server's count of requests received in the outage phase (refused connections cannot be in it). */
  serverOutage: number;
  /** Requests of the entity's own probes the server received during the outage (shared, 503 only). */
  entityProbesOutage: number;
  workersTripped: number;
  /** First and last worker's first "not closed" view during the outage (null: none / not every worker). */
  firstTripAt: number | null;
  fleetTripAt: number | null;
  /** Shared: the entity's first transition to open during the outage. */
  entityOpenAt: number | null;
  detectionCost: number | null;
  /** Requests received during the outage at or after the fleet-wide trip. */
  afterTripRequests: number | null;
  cooldownsInOutage: number;
  probesPerCooldown: number | null;
  /** The same count divided by the cooldowns left after the trip. */
  probesPerCooldownAfterTrip: number | null;
  halfOpenWindow: [number, number] | null;
  peakInFlightHalfOpen: number | null;
  serverPeakInFlightHalfOpen: number | null;
  /** Shared: the most attempts in flight inside the entity's own half-open intervals. */
  peakInFlightEntityHalfOpen: number | null;
  entityHalfOpenIntervals: number;
  /**
   * Shared: ordinary (non-probe) attempts started inside the entity's half-open intervals; of them, those decided
   * at or after the first worker knew of the trip on a view of the entity (a guard let them through while the
   * breaker was not closed: should be 0), and those decided after it failing open (Temporal out of reach for
   * that guard, by design). The rest are retries of calls decided before anyone could know. Null: no decisions
   * recorded.
   */
  ordinaryInEntityHalfOpen: { started: number; decidedAfterTrip: number; failOpenAfterTrip: number } | null;
  peakInFlightOutage: number;
  /**
   * The least any breaker could cost the outage: the attempts already in flight when it began (they fail
   * whatever anyone knows) plus one probe per cooldown (the outage's length over the cooldown, whole ones).
   */
  floor: number;
  /** Shared: the entity's opens within AFTER_RECOVERY_MS of the server's recovery, while it answers again. */
  afterRecoveryOpens: number | null;
  healthyRatePerS: number;
  recoveryMs: number | null;
  failedAttempts: number;
  viewCounts: ModeRecorder['viewCounts'];
  errors: number;
  notes: string[];
  /** guard.acquire latency (shared): mean, p99, max in ms; null when not measured. */
  decision: { count: number; meanMs: number; p99Ms: number; maxMs: number } | null;
}

/** How long after the server's recovery an open counts as one the recovery caused (ms). */
export const AFTER_RECOVERY_MS = 5_000;

export function computeFigures(args: {
  mode: ModeName;
  scenario: Scenario;
  recorder: ModeRecorder;
  server: ServerStats;
  wallMs: number;
  entityTransitions?: TransitionRecord[];
}): ModeFigures {
  const { mode, scenario, recorder, server } = args;
  const schedule = server.schedule;
  const O = schedule.outageAt;
  const E = schedule.recoverAt;
  const attempts = recorder.attempts;
  const inOutage = (t: number) => t >= O && t < E;

  const outagePhase = SERVER_PHASES.indexOf('outage');
  const entityProbesOutage =
    mode === 'shared' ? server.requests.filter((r) => r[2] < 0 && r[3] === outagePhase).length : 0;
  const entityProbeTimes = mode === 'shared' ? server.requests.filter((r) => r[2] < 0).map((r) => r[0]) : [];
  const clientOutageAttempts = attempts.filter((a) => inOutage(a.start)).length;

  // Each worker's first "not closed" view during the outage.
  const firstTrip = new Map<number, number>();
  for (const v of recorder.views) {
    if (!TRIP_VIEWS.has(v.kind) || !inOutage(v.at)) continue;
    if (!firstTrip.has(v.worker)) firstTrip.set(v.worker, v.at);
  }
  const tripTimes = [...firstTrip.values()];
  const firstTripAt = tripTimes.length ? Math.min(...tripTimes) : null;
  const fleetTripAt = firstTrip.size === scenario.workers ? Math.max(...tripTimes) : null;
  const entityOpenAt = args.entityTransitions?.find((t) => t.to === 'open' && inOutage(t.at))?.at ?? null;

  const countIn = (from: number, to: number) =>
    attempts.filter((a) => a.start >= from && a.start < to).length +
    entityProbeTimes.filter((t) => t >= from && t < to).length;
  const detectionCost = fleetTripAt !== null ? countIn(O, fleetTripAt) : null;
  const afterTripRequests = fleetTripAt !== null ? countIn(fleetTripAt, E) : null;
  const cooldownsInOutage = scenario.outageMs / scenario.breaker.cooldownMs;
  const probesPerCooldown = afterTripRequests !== null ? afterTripRequests / cooldownsInOutage : null;
  const probesPerCooldownAfterTrip =
    afterTripRequests !== null && fleetTripAt !== null && E > fleetTripAt
      ? afterTripRequests / ((E - fleetTripAt) / scenario.breaker.cooldownMs)
      : null;

  // Half-open, fleet view: from the fleet-wide trip to the first ordinary (non-probe) attempt after recovery.
  let halfOpenWindow: [number, number] | null = null;
  if (fleetTripAt !== null) {
    const firstOrdinary = attempts
      .filter((a) => a.start >= E && !a.probe)
      .reduce((m, a) => Math.min(m, a.start), schedule.endAt);
    halfOpenWindow = [fleetTripAt, firstOrdinary];
  }
  const clientIntervals = attempts.map((a): [number, number] => [a.start, a.end]);
  const serverIntervals = server.requests.map((r): [number, number] => [
    r[0],
    Number.isNaN(r[1]) ? schedule.endAt : r[1],
  ]);
  const peakInFlightHalfOpen = halfOpenWindow ? peakConcurrent(clientIntervals, [halfOpenWindow]) : null;
  const serverPeakInFlightHalfOpen = halfOpenWindow ? peakConcurrent(serverIntervals, [halfOpenWindow]) : null;

  const entityHalfOpen = halfOpenIntervals(args.entityTransitions ?? [], schedule.endAt).filter(
    ([a, b]) => b > O && a < schedule.endAt,
  );
  const peakInFlightEntityHalfOpen = args.entityTransitions
    ? peakConcurrent(
        [...clientIntervals, ...serverIntervals.filter((_, i) => server.requests[i]![2] < 0)],
        entityHalfOpen,
      )
    : null;
  const ordinaryInHalfOpen = attempts.filter(
    (a) => !a.probe && entityHalfOpen.some(([from, to]) => a.start >= from && a.start < to),
  );
  const afterTrip = ordinaryInHalfOpen.filter(
    (a) => firstTripAt !== null && a.decision !== undefined && a.decision.at >= firstTripAt,
  );
  const ordinaryInEntityHalfOpen =
    args.entityTransitions && attempts.some((a) => a.decision)
      ? {
          started: ordinaryInHalfOpen.length,
          decidedAfterTrip: afterTrip.filter((a) => !a.decision!.failOpen).length,
          failOpenAfterTrip: afterTrip.filter((a) => a.decision!.failOpen).length,
        }
      : null;

  // Full traffic: successful tiles per second over the warm-up (its first second left out), then the first
  // moment after recovery at which the trailing 1 s window holds FULL_TRAFFIC_SHARE of that rate.
  const successEnds = attempts
    .filter((a) => a.outcome === 'success')
    .map((a) => a.end)
    .sort((a, b) => a - b);
  const warmFrom = schedule.startAt + 1_000;
  const healthyRatePerS = (successEnds.filter((t) => t >= warmFrom && t < O).length / Math.max(1, O - warmFrom)) * 1000;
  const recoveryMs = timeToRate(
    successEnds,
    E,
    schedule.endAt,
    (FULL_TRAFFIC_SHARE * healthyRatePerS * RATE_WINDOW_MS) / 1000,
  );
  const floor = attempts.filter((a) => a.start < O && a.end > O).length + Math.floor(cooldownsInOutage);
  const afterRecoveryOpens = args.entityTransitions
    ? args.entityTransitions.filter(
        (t) => t.to === 'open' && t.from !== 'open' && t.at >= E && t.at < E + AFTER_RECOVERY_MS,
      ).length
    : null;

  return {
    mode,
    schedule,
    wallMs: args.wallMs,
    totalAttempts: attempts.length,
    serverTotal: server.requests.length,
    outageRequests: clientOutageAttempts + entityProbesOutage,
    clientOutageAttempts,
    serverOutage: server.byPhase.outage,
    entityProbesOutage,
    workersTripped: firstTrip.size,
    firstTripAt,
    fleetTripAt,
    entityOpenAt,
    detectionCost,
    afterTripRequests,
    cooldownsInOutage,
    probesPerCooldown,
    probesPerCooldownAfterTrip,
    halfOpenWindow,
    peakInFlightHalfOpen,
    serverPeakInFlightHalfOpen,
    peakInFlightEntityHalfOpen,
    entityHalfOpenIntervals: entityHalfOpen.length,
    ordinaryInEntityHalfOpen,
    peakInFlightOutage: peakConcurrent(clientIntervals, [[O, E]]),
    floor,
    afterRecoveryOpens,
    healthyRatePerS,
    recoveryMs,
    failedAttempts: attempts.filter((a) => a.outcome !== 'success').length,
    viewCounts: { ...recorder.viewCounts },
    errors: recorder.errors,
    notes: [...recorder.notes],
    decision: summarize(recorder.decisionMs),
  };
}

/**
 * The most intervals overlapping at any instant inside the windows. An interval is [start, end); one that
 * ends exactly when another starts does not overlap it.
 */
export function peakConcurrent(
  intervals: ReadonlyArray<readonly [number, number]>,
  windows: ReadonlyArray<readonly [number, number]>,
): number {
  let peak = 0;
  for (const [from, to] of windows) {
    if (!(to > from)) continue;
    const events: Array<[number, number]> = [];
    for (const [s, e] of intervals) {
      const a = Math.max(s, from);
      const b = Math.min(e, to);
      if (b > a) events.push([a, 1], [b, -1]);
    }
    // Ends before starts at the same instant.
    events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let cur = 0;
    for (const [, d] of events) {
      cur += d;
      if (d > 0) peak = Math.max(peak, cur);
    }
  }
  return peak;
}

/** The entity's half-open intervals, from its transition log (the last one ends at `endAt` if still open). */
export function halfOpenIntervals(transitions: readonly TransitionRecord[], endAt: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let since: number | null = null;
  for (const t of transitions) {
    if (t.to === 'half-open' && since === null) since = t.at;
    else if (t.to !== 'half-open' && since !== null) {
      out.push([since, t.at]);
      since = null;
    }
  }
  if (since !== null) out.push([since, endAt]);
  return out;
}

/** First t in (from, to] (50 ms steps) at which (t - RATE_WINDOW_MS, t] holds >= `needed` of the sorted times. */
function timeToRate(sortedEnds: number[], from: number, to: number, needed: number): number | null {
  if (!(needed > 0)) return null;
  let lo = 0;
  let hi = 0;
  for (let t = from + 50; t <= to; t += 50) {
    while (hi < sortedEnds.length && sortedEnds[hi]! <= t) hi++;
    while (lo < hi && sortedEnds[lo]! <= t - RATE_WINDOW_MS) lo++;
    if (hi - lo >= needed) return t - from;
  }
  return null;
}

function summarize(values: readonly number[]): ModeFigures['decision'] {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    meanMs: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))]!,
    maxMs: sorted[sorted.length - 1]!,
  };
}
