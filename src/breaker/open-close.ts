/**
 * Opening and closing: the fields each phase starts with, an open and its cooldown, and the half-open round's
 * trials that end in one or the other. Internal to the policy (not re-exported by index.ts).
 */
import type { PolicyConfig } from './config';
import { cooldownDurationMs, maxCooldownMs, opensFor, trialWaitMs } from './cooldown';
import type { Recorder } from './recorder';
import type { PolicyState, TransitionReason } from './state';
import { figures, type WindowFigures } from './window';

/** A new half-open round forgets the last one's failed trials. */
export const ROUND_RESET: Partial<PolicyState> = { probeSuccesses: 0, probeFailures: 0 };

export function halfOpenFields(): Partial<PolicyState> {
  return { phase: 'half-open', cooldownUntil: null, probes: [], ...ROUND_RESET };
}

export function closedFields(now: number): Partial<PolicyState> {
  // A fresh window: the failures that tripped the breaker must not trip it again at once.
  return {
    phase: 'closed',
    window: [],
    openedAt: null,
    cooldownUntil: null,
    closedAt: now,
    probes: [],
    ...ROUND_RESET,
    // Closed: the incident's failed trials are forgotten too.
    failedTrials: 0,
    retryAfterHintUntil: null,
  };
}

/** Opens the breaker for a cooldown grown by the opens (and failed trials) in a row, and by a Retry-After. */
export function open(out: Recorder, reason: TransitionReason, detail: string, rand: number, f?: WindowFigures): void {
  const s = out.state;
  const now = out.now;
  const opens = opensFor(s.config, s.consecutiveOpens, s.closedAt, now);
  const failedTrials = reason === 'probe-failed' ? s.failedTrials + 1 : 0;
  // Where failed probes are not opens, each still grows the incident's cooldown as one did.
  const grown = s.config.flapWindowMs !== null ? failedTrials : 0;
  let cooldownMs = cooldownDurationMs(s.config, opens + grown, rand);
  // Testing has begun: a failed probe is followed by the next one soon, whatever the grown cooldown; each
  // failed trial in a row waits probeBackoff times longer, up to the cooldown's cap factor.
  const interval = s.config.probeIntervalMs;
  if (reason === 'probe-failed' && interval)
    cooldownMs = Math.min(cooldownMs, trialWaitMs(s.config, interval, failedTrials, rand));
  if (s.retryAfterHintUntil !== null && s.retryAfterHintUntil > now) {
    cooldownMs = Math.max(cooldownMs, Math.min(s.retryAfterHintUntil - now, maxCooldownMs(s.config)));
  }
  out.move(
    {
      phase: 'open',
      openedAt: now,
      cooldownUntil: now + cooldownMs,
      consecutiveOpens: opens,
      closedAt: null,
      rampStartedAt: null,
      probes: [],
      ...ROUND_RESET,
      failedTrials,
      retryAfterHintUntil: null,
    },
    reason,
    detail,
    false,
    { figures: f ?? figures(s.window, now, s.config), cooldownMs },
  );
}

/** The k-of-n round's size (probeTrials), or null for consecutive successes. */
export function probeTrials(config: PolicyConfig): number | null {
  return config.probeTrials;
}

/**
 * A failed trial reopens the breaker, unless a k-of-n round (probeTrials) can still reach probesToClose
 * successes: then it is counted and the round goes on with the next probe.
 */
export function trialFailed(out: Recorder, detail: string, rand: number): void {
  out.trial('failure');
  const s = out.state;
  const trials = probeTrials(s.config);
  const failures = s.probeFailures + 1;
  if (trials !== null && trials - failures >= s.config.probesToClose) {
    out.patch({ probeFailures: failures });
    return;
  }
  open(out, 'probe-failed', trials === null ? detail : `${detail}; ${failures} of ${trials} trials failed`, rand);
}

/** A successful trial: counted toward probesToClose, and the breaker closes (ramping up) once it is reached. */
export function probeSucceeded(out: Recorder, detail: string): void {
  // A trial that succeeds ends the run of failed ones: the next failure waits probeIntervalMs again.
  if (out.state.failedTrials) out.patch({ failedTrials: 0 });
  const successes = out.state.probeSuccesses + 1;
  if (successes < out.state.config.probesToClose) {
    out.patch({ probeSuccesses: successes });
    return;
  }
  const failures = out.state.probeFailures;
  const how =
    failures > 0
      ? `${successes} successful probes of ${successes + failures} trials`
      : `${successes} consecutive successful probes`;
  out.move(
    { ...closedFields(out.now), rampStartedAt: out.state.config.rampMs > 0 ? out.now : null },
    'probes-succeeded',
    `${detail}; ${how}`,
  );
}
