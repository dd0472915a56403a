/** What a breaker state reads as: its name, the compact view workers cache, and its window's figures. */
import { stallAfterOfHistogram, totalOf } from './latency';
import type { BreakerStateName, BreakerView, PolicyState } from './state';
import { figures, windowLatency, type WindowFigures } from './window';

export function stateName(s: PolicyState): BreakerStateName {
  return s.mode === 'auto' ? s.phase : s.mode;
}

/** The compact view of a state that workers cache (the entity's `view` query). */
export function breakerView(s: PolicyState, activeReporters = 0): BreakerView {
  const rate = s.config.maxRequestsPerSecond;
  return {
    ...(rate !== null ? { rateLimit: rate, activeReporters } : {}),
    ...(s.pacedUntil ? { pacedUntil: s.pacedUntil } : {}),
    state: stateName(s),
    mode: s.mode,
    phase: s.phase,
    cooldownUntil: s.cooldownUntil,
    forcedUntil: s.forcedUntil,
    rampStartedAt: s.rampStartedAt,
    rampMs: s.config.rampMs,
    rampFloor: s.config.rampFloor,
    probesOutstanding: s.probes.length,
    maxConcurrentProbes: s.config.maxConcurrentProbes,
    generation: s.lastGeneration,
  };
}

/** The window's figures at `now`. */
export function windowFigures(s: PolicyState, now: number): WindowFigures {
  return figures(s.window, now, s.config);
}

/**
 * The stall threshold the fleet's calls give (latency.ts's stallAfterOfHistogram over the window, once it holds
 * latencyMinSamples of them; null before then), for a guard that has not yet seen enough calls of its own, and
 * how many latency samples the window holds. One pass over the window: the entity asks on every report.
 */
export function windowStall(s: PolicyState, now: number): { stallMs: number | null; samples: number } {
  const latency = windowLatency(s.window, now, s.config);
  return { stallMs: stallAfterOfHistogram(latency, s.config.latencyMinSamples), samples: totalOf(latency) };
}
