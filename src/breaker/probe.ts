/**
 * Half-open probes: granting a token (fenced by its generation, leased for probeLeaseMs), cancelling one, and
 * counting a probe's result as a trial. Internal to the policy.
 */
import { probeLatencyLimitMs, type PolicyConfig } from './config';
import { probeSucceeded, trialFailed } from './open-close';
import { isFailure } from './outcome';
import type { Recorder } from './recorder';
import type { PolicyEvent, ProbeDecision } from './state';
import { stateName } from './view';

/** Grants a probe token, gives back the one a repeated request holds, or says why not. */
export function onProbeRequest(out: Recorder, requestId: string, requester: string): ProbeDecision {
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
export function onProbeCancel(out: Recorder, requestId: string): void {
  const held = out.state.probes.filter((p) => p.requestId === requestId);
  if (held.length) out.patch({ probes: out.state.probes.filter((p) => p.requestId !== requestId) });
  else out.ignore(`probe cancel for ${requestId} ignored: it holds no live token`);
}

/** Releases the result's token and counts the result as a trial (success, failure, or nothing). */
export function onProbeResult(
  out: Recorder,
  event: Extract<PolicyEvent, { type: 'probe-result' }>,
  rand: number,
): void {
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
