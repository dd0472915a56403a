/**
 * The breaker as a pure state machine: `step(state, event, now, rand)`. `now` is the caller's clock in ms
 * (the workflow clock in the entity) and `rand` a number in [0, 1) from the caller's seeded randomness; the
 * same inputs always give the same result, so the entity replays. Inputs are never mutated.
 */
import { ConfigError } from './config-error';
import { fastWindowSpanMs, parsePolicyConfig, probeLatencyLimitMs, type PolicyConfig } from './config';
import { maxCooldownMs } from './cooldown';
import {
  closedFields,
  halfOpenFields,
  open,
  probeSucceeded,
  probeTrials,
  ROUND_RESET,
  trialFailed,
} from './open-close';
import { isFailure, type OutcomeCounts } from './outcome';
import { quorumFigures } from './quorum';
import { Recorder } from './recorder';
import { floorsFor, quorumShortfall, shouldTrip } from './rules';
import type { PolicyEvent, PolicyState, ProbeDecision, StepResult } from './state';
import { stateName } from './view';
import { fastFigures, figures, prune, record, recordSpread } from './window';

export function initialState(config: PolicyConfig): PolicyState {
  return {
    version: 2,
    config,
    mode: 'auto',
    forcedUntil: null,
    phase: 'closed',
    window: [],
    openedAt: null,
    cooldownUntil: null,
    consecutiveOpens: 0,
    closedAt: null,
    rampStartedAt: null,
    probes: [],
    lastGeneration: 0,
    probeSuccesses: 0,
    probeFailures: 0,
    failedTrials: 0,
    retryAfterHintUntil: null,
    pacedUntil: null,
  };
}

/** Applies one event at time `now`. Time-driven changes (cooldown end, lease expiry) happen first. */
export function step(state: PolicyState, event: PolicyEvent, now: number, rand: number): StepResult {
  const out = new Recorder(advance(state, now), now);
  switch (event.type) {
    case 'tick':
      break;
    case 'report':
      onReport(out, event, rand);
      break;
    case 'probe-request': {
      const decision = onProbeRequest(out, event.requestId, event.requester);
      return { ...out.result(), decision };
    }
    case 'probe-result':
      onProbeResult(out, event, rand);
      break;
    case 'probe-cancel':
      onProbeCancel(out, event.requestId);
      break;
    case 'force-open':
      onForceOpen(out, event);
      break;
    case 'force-close':
      out.move(
        { ...closedFields(now), mode: 'forced-closed', forcedUntil: null, rampStartedAt: null },
        'forced-close',
        event.reason ?? 'forced closed',
      );
      break;
    case 'reset':
      // Generations keep counting: a token granted before the reset must stay stale after it.
      // A pause a Retry-After asked for ends too.
      out.move(
        { ...initialState(out.state.config), lastGeneration: out.state.lastGeneration },
        'reset',
        event.reason ?? 'reset',
        true,
      );
      break;
    case 'disable':
      out.move(
        { mode: 'metrics-only', forcedUntil: null, probes: [], ...ROUND_RESET },
        'disabled',
        event.reason ?? 'metrics only: never blocks',
      );
      break;
    case 'enable':
      onEnable(out, event.reason ?? 'automatic mode');
      break;
    case 'configure':
      onConfigure(out, event.config);
      break;
  }
  return out.result();
}

/** The earliest moment after `now` at which the state changes by itself (a cooldown, a lease, a timed force-open), or null. */
export function nextDeadline(s: PolicyState, now: number): number | null {
  const times = [
    s.mode !== 'forced-open' && s.phase === 'open' ? s.cooldownUntil : null,
    s.mode === 'forced-open' ? s.forcedUntil : null,
    ...s.probes.map((p) => p.leaseUntil),
  ].filter((t): t is number => t !== null && t > now);
  return times.length ? Math.min(...times) : null;
}

/** The time-driven part of every step: slide the window, expire leases, end cooldowns and timed force-opens. */
export function advance(state: PolicyState, now: number): StepResult {
  const out = new Recorder(state, now);
  const s = out.state;
  const window = prune(s.window, now, s.config);
  const probes = s.probes.filter((p) => p.leaseUntil > now);
  if (window.length !== s.window.length || probes.length !== s.probes.length) out.patch({ window, probes });
  // A pause that has ended is forgotten, so the view stops carrying it.
  if (s.pacedUntil !== null && s.pacedUntil <= now) out.patch({ pacedUntil: null });
  if (s.mode === 'forced-open' && s.forcedUntil !== null && s.forcedUntil <= now) {
    // Recorded at the moment it became due, not when the next event happened to arrive.
    out.move(
      { mode: 'auto', forcedUntil: null, ...halfOpenFields() },
      'force-expired',
      'forced open period ended; testing recovery',
      false,
      {
        at: s.forcedUntil,
      },
    );
  } else if (
    (s.mode === 'auto' || s.mode === 'metrics-only') &&
    s.phase === 'open' &&
    s.cooldownUntil !== null &&
    s.cooldownUntil <= now
  ) {
    out.move(
      halfOpenFields(),
      'cooldown-elapsed',
      `cooldown of ${s.cooldownUntil - (s.openedAt ?? s.cooldownUntil)} ms elapsed`,
      false,
      {
        at: s.cooldownUntil,
      },
    );
  }
  return out.result();
}

function onForceOpen(out: Recorder, event: Extract<PolicyEvent, { type: 'force-open' }>): void {
  const { durationMs } = event;
  if (durationMs !== undefined && !(Number.isFinite(durationMs) && durationMs > 0)) {
    out.ignore(`force-open rejected: durationMs must be a positive number of ms (got ${durationMs})`);
    return;
  }
  // closedAt: null, so time spent forced open does not count as calm time that forgives consecutive opens.
  out.move(
    {
      mode: 'forced-open',
      forcedUntil: durationMs ? out.now + durationMs : null,
      probes: [],
      ...ROUND_RESET,
      closedAt: null,
      rampStartedAt: null,
    },
    'forced-open',
    event.reason ?? (durationMs ? `forced open for ${durationMs} ms` : 'forced open'),
  );
}

function onEnable(out: Recorder, reason: string): void {
  const s = out.state;
  if (s.mode === 'auto') return;
  // Out of a forced open, test recovery first; out of the other modes traffic was flowing anyway.
  const fields = s.mode === 'forced-open' ? halfOpenFields() : { ...closedFields(out.now), rampStartedAt: null };
  out.move({ ...fields, mode: 'auto', forcedUntil: null }, 'enabled', reason);
}

function onConfigure(out: Recorder, patch: object): void {
  try {
    const s = out.state;
    const config = parsePolicyConfig({ ...s.config, ...patch });
    const changed = Object.keys(patch).join(', ');
    // Successes counted toward the old probesToClose, or failures against the old probeTrials, would let a
    // round close on fewer successes or after more trials than either rule allows: the round starts again.
    const ruleChanged =
      config.probesToClose !== s.config.probesToClose || probeTrials(config) !== probeTrials(s.config);
    const restart = ruleChanged && s.phase === 'half-open' && (s.probeSuccesses > 0 || s.probeFailures > 0);
    const round = restart ? ROUND_RESET : {};
    const detail = `configuration changed: ${changed}${restart ? '; the probe round starts again' : ''}`;
    out.move({ config, window: prune(s.window, out.now, config), ...round }, 'configured', detail, true);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    out.ignore(`configuration rejected: ${err.message}`);
  }
}

/** The `report` event. */
type ReportEvent = Extract<PolicyEvent, { type: 'report' }>;

/** Applies a report: records it, then trips the breaker if a rule holds (or counts it as a shadow probe). */
function onReport(out: Recorder, event: ReportEvent, rand: number): void {
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

/** Grants a probe token, gives back the one a repeated request holds, or says why not. */
function onProbeRequest(out: Recorder, requestId: string, requester: string): ProbeDecision {
  const s = out.state;
  const now = out.now;
  if (s.mode === 'forced-open') {
    return { kind: 'denied', reason: 'forced-open', retryAfterMs: s.forcedUntil === null ? null : s.forcedUntil - now };
  }
  if (s.mode !== 'auto' || s.phase === 'closed') return { kind: 'not-needed', state: stateName(s) };
  if (s.phase === 'open')
    return { kind: 'denied', reason: 'open', retryAfterMs: Math.max(0, (s.cooldownUntil ?? now) - now) };
  // A repeated request (a retried activity, a redelivered signal) gets the token it already holds.
  const held = s.probes.find((p) => p.requestId === requestId);
  if (held) return { kind: 'granted', token: held };
  if (s.probes.length >= s.config.maxConcurrentProbes) {
    const nextFree = Math.min(...s.probes.map((p) => p.leaseUntil));
    return { kind: 'denied', reason: 'busy', retryAfterMs: nextFree - now };
  }
  const token = {
    generation: s.lastGeneration + 1,
    requestId,
    holder: requester,
    grantedAt: now,
    leaseUntil: now + s.config.probeLeaseMs,
  };
  out.patch({ probes: [...s.probes, token], lastGeneration: token.generation });
  return { kind: 'granted', token };
}

/** Releases the tokens a request holds, without counting a trial. */
function onProbeCancel(out: Recorder, requestId: string): void {
  const held = out.state.probes.filter((p) => p.requestId === requestId);
  if (held.length) out.patch({ probes: out.state.probes.filter((p) => p.requestId !== requestId) });
  else out.ignore(`probe cancel for ${requestId} ignored: it holds no live token`);
}

/** Releases the result's token and counts the result as a trial (success, failure, or nothing). */
function onProbeResult(out: Recorder, event: Extract<PolicyEvent, { type: 'probe-result' }>, rand: number): void {
  const s = out.state;
  const token = s.probes.find((p) => p.generation === event.generation);
  if (!token) {
    out.ignore(`probe result for generation ${event.generation} ignored: no live token (stale, expired or unknown)`);
    return;
  }
  out.patch({ probes: s.probes.filter((p) => p !== token) });
  // With the latency rule on, a probe slower than the budget is no sign of recovery: closing on it would trip
  // the rule again at once (flapping).
  const limit = probeLatencyLimitMs(s.config);
  if (event.outcome === 'success' && limit !== null && event.latencyMs !== undefined && event.latencyMs > limit) {
    trialFailed(
      out,
      `probe ${event.generation} by ${token.holder} succeeded in ${Math.round(event.latencyMs)} ms, slower than the ${slowerThan(s.config, limit)}`,
      rand,
    );
    return;
  }
  if (isFailure(event.outcome)) {
    if (event.retryAfterMs)
      out.patch({ retryAfterHintUntil: Math.max(s.retryAfterHintUntil ?? 0, out.now + event.retryAfterMs) });
    trialFailed(out, `probe ${event.generation} by ${token.holder} failed: ${event.outcome}`, rand);
  } else if (event.outcome === 'success') {
    out.trial('success');
    probeSucceeded(out, `probe ${event.generation} by ${token.holder} succeeded`);
  }
  // neutral, permanent and rate-limited probes say nothing about health: the token is released, no count.
}

/** Which limit a slow probe broke, for the transition's detail. */
function slowerThan(config: PolicyConfig, limitMs: number): string {
  return limitMs === config.slowCallMs
    ? `slow-call threshold ${Math.round(limitMs)} ms`
    : `latency budget ${Math.round(limitMs)} ms`;
}
