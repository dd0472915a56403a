import { FULL_TRAFFIC_SHARE, RATE_WINDOW_MS, type ModeFigures } from './metrics';
import type { ModeName, Scenario } from './types';

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rel = (t: number, from: number) => `+${((t - from) / 1000).toFixed(2)} s`;

/** One mode's table: the five figures, total requests and wall time, each with how it was measured. */
export function modeTable(f: ModeFigures, scenario: Scenario): string {
  const O = f.schedule.outageAt;
  const rows: Array<[string, string, string]> = [];
  rows.push([
    'requests received during the outage',
    String(f.outageRequests),
    `client-side attempts ${f.clientOutageAttempts}${f.mode === 'shared' ? ` + entity self-probes ${f.entityProbesOutage}` : ''}; server handler saw ${f.serverOutage}` +
      (scenario.outageKind === 'refused' ? ' (refused connections never reach it)' : ''),
  ]);
  const tripDetail =
    f.firstTripAt === null
      ? f.mode === 'retry-only'
        ? 'no breaker'
        : 'no worker saw a trip during the outage'
      : `first worker knew ${rel(f.firstTripAt, O)}, ${f.fleetTripAt !== null ? `all ${f.workersTripped} by ${rel(f.fleetTripAt, O)}` : `only ${f.workersTripped}/${scenario.workers} workers ever`}` +
        (f.entityOpenAt !== null ? `; entity opened ${rel(f.entityOpenAt, O)}` : '') +
        ' (after outage start)';
  rows.push([
    'detection cost (requests before fleet-wide trip)',
    f.detectionCost === null ? 'n/a' : String(f.detectionCost),
    tripDetail,
  ]);
  rows.push([
    'probes per cooldown during the outage',
    f.probesPerCooldown === null ? 'n/a' : f.probesPerCooldown.toFixed(2),
    f.afterTripRequests === null
      ? 'no fleet-wide trip'
      : `${f.afterTripRequests} requests after the trip / ${f.cooldownsInOutage} cooldowns (${f.probesPerCooldownAfterTrip?.toFixed(2) ?? 'n/a'} per cooldown left after the trip)`,
  ]);
  rows.push([
    'most requests in flight while half-open',
    f.peakInFlightHalfOpen === null ? 'n/a' : String(f.peakInFlightHalfOpen),
    f.halfOpenWindow === null
      ? `no fleet-wide trip (most in flight during the outage: ${f.peakInFlightOutage})`
      : `client-side, ${rel(f.halfOpenWindow[0], O)} .. ${rel(f.halfOpenWindow[1], O)}; server-side ${f.serverPeakInFlightHalfOpen}` +
        (f.peakInFlightEntityHalfOpen !== null
          ? `; inside the entity's ${f.entityHalfOpenIntervals} half-open intervals ${f.peakInFlightEntityHalfOpen}`
          : '') +
        (f.ordinaryInEntityHalfOpen
          ? ` (ordinary calls started in them: ${f.ordinaryInEntityHalfOpen.started}, decided after a worker knew of the trip: ${f.ordinaryInEntityHalfOpen.decidedAfterTrip}, and failing open: ${f.ordinaryInEntityHalfOpen.failOpenAfterTrip})`
          : ''),
  ]);
  rows.push([
    'time from upstream recovery to full traffic',
    f.recoveryMs === null ? 'never' : s(f.recoveryMs),
    `${Math.round(FULL_TRAFFIC_SHARE * 100)}% of the warm-up rate (${f.healthyRatePerS.toFixed(1)} tiles/s) over a trailing ${RATE_WINDOW_MS / 1000} s` +
      (f.recoveryMs === null ? ` not reached in the ${s(scenario.recoveryMs)} recovery phase` : ''),
  ]);
  rows.push([
    'total requests',
    String(f.totalAttempts),
    `client-side attempts; server handler saw ${f.serverTotal}; failed attempts ${f.failedAttempts}`,
  ]);
  rows.push(['wall time', s(f.wallMs), 'this mode, setup and teardown included']);
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  const head = `== ${f.mode} ==  ${scenario.workers} workers; ${scenario.outageKind} outage ${s(scenario.outageMs)} after ${s(scenario.healthyMs)} healthy, then ${s(scenario.recoveryMs)} recovered; cooldown ${scenario.breaker.cooldownMs} ms`;
  const views = Object.entries(f.viewCounts)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const lines = [head, ...rows.map(([a, b, c]) => `  ${a.padEnd(w0)}  ${b.padStart(w1)}  ${c}`)];
  if (views) lines.push(`  breaker views/decisions: ${views}`);
  if (f.decision) {
    const d = f.decision;
    lines.push(
      `  guard.acquire took mean ${d.meanMs.toFixed(1)} ms, p99 ${d.p99Ms.toFixed(1)} ms, max ${d.maxMs.toFixed(0)} ms over ${d.count} decisions`,
    );
  }
  if (f.errors) lines.push(`  errors: ${f.errors} (first: ${f.notes.join(' | ')})`);
  return lines.join('\n');
}

export const DEFINITIONS = [
  'definitions:',
  '  requests = HTTP attempts counted client-side (each try of the retry policy; a refused connection counts), the same way in every mode;',
  "    in the shared mode the entity's own probes are added as the server counts them (invisible in a refused outage). Times are the attempt's start.",
  '  outage window = [the moment the server switched to failing, the moment it recovered), as the server recorded them.',
  "  floor = attempts in flight at the outage's start (they fail whatever anyone knows) + one probe per whole cooldown in the outage;",
  "    after-recovery-opens = the entity's transitions into open in the 5 s after the server recovered (it answers again).",
  '  a worker knows of the trip at its first breaker view during the outage that is not "closed": per-process, its cockatiel breaker\'s',
  '    onBreak (or a refusal / half-open); shared, its first guard decision other than proceed (refused or probe).',
  '  fleet-wide trip = the moment the LAST worker knew; detection cost = requests in [outage start, fleet-wide trip).',
  '  probes per cooldown = requests in [fleet-wide trip, outage end) / (outage length / cooldown), as the issue defines it;',
  '    "per cooldown left after the trip" divides by (outage end - trip) / cooldown instead.',
  '  half-open (fleet view) = [fleet-wide trip, first non-probe attempt after recovery): the breakers are open or half-open, so every',
  '    request is a probe; most in flight = the peak of overlapping [start, end) attempts in it. Shared also reports the peak inside the',
  "    entity's own half-open intervals (its transition log), and how many ordinary (non-probe) calls started in them, of which how many",
  '    were decided at or after the first worker knew of the trip (a guard let them through while not closed: should be 0) or failed',
  '    open after it (the guard could not reach Temporal: by design).',
  `  full traffic = successful tiles over a trailing ${RATE_WINDOW_MS / 1000} s reach ${Math.round(FULL_TRAFFIC_SHARE * 100)}% of the warm-up rate (warm-up minus its first second);`,
  "    recovery time = from the server's recovery to the end of the first such window (50 ms steps).",
].join('\n');

export interface FinalFigures {
  outage: Record<ModeName, number | null>;
  maxProbes: number | null;
  probesPerCooldown: number | null;
  detectShared: number | null;
  detectPerProcess: number | null;
  recoveryS: number | null;
  /** Seconds from the outage's start to the entity opening (shared mode). */
  tripS: number | null;
  /** Shared mode's floor: attempts in flight at the outage's start plus one probe per cooldown. */
  floor: number | null;
  /** Shared: the entity's opens in the 5 s after the server recovered. */
  afterRecoveryOpens: number | null;
}

/** The last line, exactly: missing figures are -1. */
export function finalLine(f: FinalFigures): string {
  const int = (v: number | null) => (v === null ? '-1' : String(Math.round(v)));
  const flt = (v: number | null) => (v === null ? '-1' : v.toFixed(2));
  return (
    `outage: shared=${int(f.outage.shared)} per-process=${int(f.outage['per-process'])} retry-only=${int(f.outage['retry-only'])}` +
    ` max-probes=${int(f.maxProbes)} probes-per-cooldown=${flt(f.probesPerCooldown)} detect-shared=${int(f.detectShared)}` +
    ` detect-per-process=${int(f.detectPerProcess)} recovery-s=${flt(f.recoveryS)} trip-s=${flt(f.tripS)} floor=${int(f.floor)} after-recovery-opens=${int(f.afterRecoveryOpens)}`
  );
}

export function finalFigures(figs: Partial<Record<ModeName, ModeFigures>>): FinalFigures {
  const shared = figs.shared;
  const peaks = shared
    ? [shared.peakInFlightHalfOpen, shared.serverPeakInFlightHalfOpen, shared.peakInFlightEntityHalfOpen].filter(
        (v): v is number => v !== null,
      )
    : [];
  return {
    outage: {
      shared: shared?.outageRequests ?? null,
      'per-process': figs['per-process']?.outageRequests ?? null,
      'retry-only': figs['retry-only']?.outageRequests ?? null,
    },
    maxProbes: peaks.length ? Math.max(...peaks) : null,
    probesPerCooldown: shared?.probesPerCooldown ?? null,
    detectShared: shared?.detectionCost ?? null,
    detectPerProcess: figs['per-process']?.detectionCost ?? null,
    recoveryS: shared?.recoveryMs != null ? shared.recoveryMs / 1000 : null,
    tripS: shared?.entityOpenAt != null ? (shared.entityOpenAt - shared.schedule.outageAt) / 1000 : null,
    floor: shared?.floor ?? null,
    afterRecoveryOpens: shared?.afterRecoveryOpens ?? null,
  };
}

/** The targets, checked against what was measured. */
export function targetLines(
  figs: Partial<Record<ModeName, ModeFigures>>,
  f: FinalFigures,
  tileLatencyMs: number,
): string[] {
  const out: string[] = ['targets (shared mode):'];
  const mark = (ok: boolean | null) => (ok === null ? 'n/a ' : ok ? 'met ' : 'MISS');
  const sh = f.outage.shared;
  const pp = f.outage['per-process'];
  out.push(
    `  ${mark(sh !== null && pp !== null ? sh * 10 <= pp : null)} outage requests at least 10x below per-process (${sh ?? 'n/a'} vs ${pp ?? 'n/a'})`,
  );
  out.push(
    `  ${mark(f.probesPerCooldown !== null ? f.probesPerCooldown <= 1 : null)} at most one probe per cooldown (${f.probesPerCooldown?.toFixed(2) ?? 'n/a'})`,
  );
  out.push(`  ${mark(f.maxProbes !== null ? f.maxProbes <= 1 : null)} max-probes = 1 (${f.maxProbes ?? 'n/a'})`);
  out.push(
    `  ${mark(f.detectShared !== null && f.detectPerProcess !== null ? f.detectShared <= f.detectPerProcess : null)} detection cost no higher than per-process (${f.detectShared ?? 'n/a'} vs ${f.detectPerProcess ?? 'n/a'})`,
  );
  const shared = figs.shared;
  const lag =
    shared && shared.fleetTripAt !== null && shared.entityOpenAt !== null
      ? shared.fleetTripAt - shared.entityOpenAt
      : null;
  out.push(
    `  ${mark(lag !== null ? lag <= 2000 : null)} every worker sees the trip within 2 s of the entity opening (${lag !== null ? s(lag) : 'n/a'})`,
  );
  // A hang is told from a render only after a few render times: 3 s for a fast server, 8 s for one taking 2 s.
  const tripTargetS = Math.max(3, (4 * tileLatencyMs) / 1000);
  out.push(
    `  ${mark(f.tripS !== null ? f.tripS <= tripTargetS : null)} the entity opens within ${tripTargetS} s of the outage's start (trip-s ${f.tripS?.toFixed(2) ?? 'n/a'})`,
  );
  out.push(
    `  ${mark(sh !== null && f.floor !== null ? sh <= 2 * f.floor : null)} outage requests at most 2x the floor (${sh ?? 'n/a'} vs floor ${f.floor ?? 'n/a'})`,
  );
  out.push(
    `  ${mark(f.afterRecoveryOpens !== null ? f.afterRecoveryOpens === 0 : null)} no open in the 5 s after the recovery (${f.afterRecoveryOpens ?? 'n/a'})`,
  );
  return out;
}
