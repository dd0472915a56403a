/**
 * The breaker as a pure state machine: `step(state, event, now, rand)`. `now` is the caller's clock in ms
 * (the workflow clock in the entity) and `rand` a number in [0, 1) from the caller's seeded randomness; the
 * same inputs always give the same result, so the entity replays. Inputs are never mutated.
 *
 * This module holds the step and its dispatch, the time-driven advance and the operator's commands; reports
 * are in report.ts, probes in probe.ts, opening and closing in open-close.ts, what a state reads as in
 * view.ts and permit.ts.
 */
import { ConfigError } from './config-error';
import { parsePolicyConfig, type PolicyConfig } from './config';
import { closedFields, halfOpenFields, probeTrials, ROUND_RESET } from './open-close';
import { onProbeCancel, onProbeRequest, onProbeResult } from './probe';
import { Recorder } from './recorder';
import { onReport } from './report';
import type { PolicyEvent, PolicyState, StepResult } from './state';
import { prune } from './window';

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
