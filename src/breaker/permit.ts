/** What a worker may do given a breaker's view: its permit, its ramp allowance, its share of the rate. */
import type { BreakerView, Permit, PolicyState } from './state';
import { breakerView } from './view';

/** What a worker may do at `now` given this (possibly slightly stale) state. */
export function permit(state: PolicyState, now: number): Permit {
  return permitFor(breakerView(state), now);
}

/**
 * This worker's share of the fleet-wide rate (requests/s), or null for no limit: the rate divided among the
 * workers the entity has heard from, counting this one if it has not reported yet, scaled by the ramp.
 */
export function rateShare(v: BreakerView, allowance: number, counted: boolean): number | null {
  if (v.rateLimit === undefined) return null;
  const workers = Math.max(1, (v.activeReporters ?? 0) + (counted ? 0 : 1));
  return (v.rateLimit / workers) * allowance;
}

/**
 * How long a worker must still hold its calls to the endpoint at `now` (its own clock) because a 429 asked the
 * fleet to wait: 0 when it need not. The breaker's state is another matter (permitFor): a paced endpoint is
 * closed, and nothing was counted against it.
 */
export function pausedForMs(v: Pick<BreakerView, 'pacedUntil'>, now: number): number {
  return v.pacedUntil === undefined ? 0 : Math.max(0, v.pacedUntil - now);
}

/**
 * What a worker may do at `now` (its own clock) given a view. A cooldown or timed force-open that has ended
 * by `now` reads as half-open even if the view still says open: the entity's timer is due, so ask for a probe.
 */
export function permitFor(v: BreakerView, now: number): Permit {
  const refuse = (retryAfterMs: number | null): Permit => ({
    state: v.state,
    allow: false,
    retryAfterMs,
    allowance: 0,
    probeRequired: false,
  });
  const halfOpen: Permit = { state: 'half-open', allow: false, retryAfterMs: null, allowance: 0, probeRequired: true };
  switch (v.state) {
    case 'closed':
      return {
        state: v.state,
        allow: true,
        retryAfterMs: null,
        allowance: rampAllowanceFor(v, now),
        probeRequired: false,
      };
    case 'forced-closed':
    case 'metrics-only':
      return { state: v.state, allow: true, retryAfterMs: null, allowance: 1, probeRequired: false };
    case 'open':
      if (v.cooldownUntil !== null && v.cooldownUntil <= now) return halfOpen;
      return refuse(Math.max(0, (v.cooldownUntil ?? now) - now));
    case 'forced-open':
      if (v.forcedUntil !== null && v.forcedUntil <= now) return halfOpen;
      return refuse(v.forcedUntil === null ? null : v.forcedUntil - now);
    case 'half-open':
      return halfOpen;
  }
}

/** Fraction of normal concurrency allowed: grows linearly from rampFloor to 1 over rampMs after a recovery. */
export function rampAllowance(s: PolicyState, now: number): number {
  return rampAllowanceFor(breakerView(s), now);
}

function rampAllowanceFor(v: BreakerView, now: number): number {
  if (v.state !== 'closed' || v.rampStartedAt === null || v.rampMs === 0) return 1;
  const progress = (now - v.rampStartedAt) / v.rampMs;
  if (progress >= 1) return 1;
  return v.rampFloor + (1 - v.rampFloor) * Math.max(0, progress);
}
