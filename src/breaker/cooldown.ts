import type { PolicyConfig } from './config';

/** The longest cooldown before jitter: cooldownMs * cooldownMaxFactor. */
export function cooldownCapMs(config: PolicyConfig): number {
  return config.cooldownMs * config.cooldownMaxFactor;
}

/**
 * Cooldown for the `consecutiveOpens`-th open in a row (1 for the first):
 * min(cooldownMs * multiplier^(opens-1), cap), scaled by 1 + jitter * (2 * rand - 1).
 * `rand` is in [0, 1) and comes from the caller (the workflow's seeded randomness), so this replays.
 * Always within [cooldownMs * (1 - jitter), cap * (1 + jitter)].
 */
export function cooldownDurationMs(config: PolicyConfig, consecutiveOpens: number, rand: number): number {
  const exponent = Math.max(0, consecutiveOpens - 1);
  const grown = Math.min(config.cooldownMs * config.cooldownMultiplier ** exponent, cooldownCapMs(config));
  const r = Math.min(Math.max(rand, 0), 1);
  const jittered = Math.round(grown * (1 + config.cooldownJitter * (2 * r - 1)));
  // Whole milliseconds, kept inside the documented bounds after rounding.
  return Math.min(
    Math.max(jittered, Math.ceil(config.cooldownMs * (1 - config.cooldownJitter))),
    maxCooldownMs(config),
  );
}

/** The longest an upstream Retry-After may hold the breaker open: the jittered cap. */
export function maxCooldownMs(config: PolicyConfig): number {
  return Math.floor(cooldownCapMs(config) * (1 + config.cooldownJitter));
}

/**
 * Consecutive opens remembered after the breaker has stayed closed from `closedAt` to `now`:
 * each full cooldownDecayMs forgives one.
 */
export function decayedOpens(
  config: PolicyConfig,
  consecutiveOpens: number,
  closedAt: number | null,
  now: number,
): number {
  if (closedAt === null) return consecutiveOpens;
  const periods = Math.floor(Math.max(0, now - closedAt) / config.cooldownDecayMs);
  return Math.max(0, consecutiveOpens - periods);
}

/**
 * The consecutive opens a new open carries. Without flapWindowMs (null), every open
 * counts, a failed probe's too, less what cooldownDecayMs forgave. With it, an incident is one open however
 * many probes fail in it (`closedAt` null: not closed since it opened); a trip within flapWindowMs of the
 * last close is the same flapping server again, one more; a later one is a new incident, the first.
 */
export function opensFor(config: PolicyConfig, consecutiveOpens: number, closedAt: number | null, now: number): number {
  const flap = config.flapWindowMs;
  if (flap === null) return decayedOpens(config, consecutiveOpens, closedAt, now) + 1;
  if (closedAt === null) return Math.max(1, consecutiveOpens);
  return now - closedAt < flap ? consecutiveOpens + 1 : 1;
}

/**
 * The wait after the `failedTrials`-th failed trial in a row (1 for the first): probeIntervalMs x
 * probeBackoff^(n-1), at most probeIntervalMs x cooldownMaxFactor, +/- cooldownJitter; at least 1 ms.
 */
export function trialWaitMs(config: PolicyConfig, intervalMs: number, failedTrials: number, rand: number): number {
  const backoff = config.probeBackoff;
  const grown = Math.min(
    intervalMs * backoff ** Math.max(0, failedTrials - 1),
    intervalMs * Math.max(1, config.cooldownMaxFactor),
  );
  return Math.max(1, Math.round(grown * (1 + config.cooldownJitter * (2 * rand - 1))));
}
