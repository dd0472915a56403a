import { z } from 'zod';
import { ConfigError, parseOrThrow } from './config-error';

const ms = (min: number) => z.number().int().min(min);
/** The probe cadence after a failed probe, unless the cooldown is shorter. */
const DEFAULT_PROBE_INTERVAL_MS = 5_000;
/** The longest duration a setting may hold, and the longest grown cooldown or trial wait: 30 days, as a timed force-open. */
export const MAX_POLICY_DURATION_MS = 30 * 86_400_000;
const fraction = z.number().min(0).max(1);

/**
 * Breaker policy configuration. Every duration is in milliseconds. The defaults here are the one table of
 * them: what a new breaker entity runs on, and what docs/policy.md lists (a 30 s window, 20 samples, half
 * failing from 2 reporters, a 30 s cooldown).
 */
export const policyConfigSchema = z
  .object({
    /** Length of the rolling window of outcomes. */
    windowMs: ms(1_000).max(3_600_000).default(30_000),
    /**
     * Width of one window bucket; the window holds windowMs / bucketMs buckets (at most 600). Default:
     * windowMs / 120, at least 250 ms (250 ms for the default 30 s window), so the fast window is fine-grained.
     */
    bucketMs: ms(100).optional(),
    /**
     * The failure-ratio rule also runs over the newest buckets: the shortest run of them, newest first and
     * within fastWindowMs, that holds fastMinSamples samples (0: off). A fleet-wide breaker collects that many
     * in a fraction of a second, so an outage trips it almost at once instead of waiting for failures to
     * outweigh 30 s of earlier successes; a quiet endpoint never fills it and is judged on the whole window.
     */
    fastWindowMs: ms(0).default(1_000),
    /**
     * The fast window spans at least the endpoint's p95 latency (the window's, once it holds latencyMinSamples
     * of them; at most windowMs / 4). Calls that hang on a renderer taking seconds started over a render time, so
     * their stalls arrive over one too: a one-second fast window never holds enough of them at once. false:
     * fastWindowMs whatever the latency.
     */
    fastWindowFollowsLatency: z.boolean().default(true),
    /**
     * ... as soon as the window holds as many latency samples as the sample floor in force (minSamples, as the
     * fleet's concurrency lowers it), not latencyMinSamples: one worker early in a night has a dozen answers,
     * and its stalls must be judged together then too.
     */
    fastWindowFollowsFloor: z.boolean().default(true),
    /** Samples the fast window needs (counted like minSamples; at least minSamples). Default: 2 x minSamples. */
    fastMinSamples: ms(1).optional(),
    /** No rule trips on fewer health-relevant samples than this in the window. */
    minSamples: ms(1).default(20),
    /**
     * When the fleet has fewer calls in flight than minSamples or fastMinSamples (as its guards report), those
     * floors come down to that concurrency, but not below this: a floor the traffic cannot reach never trips.
     * null: the floors stay as configured.
     */
    volumeFloor: ms(1).nullable().default(5),
    /**
     * A fleet with fewer calls in flight than volumeFloor (one worker at concurrency 4) could never reach it on
     * stalled calls: its floors come down to its concurrency, but not below this (3, not 2: two calls dropped
     * together as a hung server comes back are too little to open on). null: volumeFloor holds.
     */
    smallFleetFloor: ms(1).nullable().default(3),
    /**
     * The failure-ratio rules (whole window and fast window) trip only when the failures come from at least this
     * many distinct reporters, or from every active one when fewer have reported outcomes in the last 5 s; a
     * reporter counts as failing when its own report's failure ratio reaches half of failureRatio. One worker whose own network
     * fails cannot open the fleet's breaker. 1: off.
     */
    quorum: ms(1).max(16).default(2),
    /** Trip when failures / (successes + failures) reaches this. */
    failureRatio: z.number().gt(0).max(1).default(0.5),
    /** The endpoint's p95 latency when healthy; the latency budget is this times latencyBudgetFactor. */
    healthyP95Ms: z.number().positive().nullable().default(null),
    latencyBudgetFactor: z.number().min(1).default(1.5),
    /** An explicit latency budget; overrides healthyP95Ms * latencyBudgetFactor. Null with no healthyP95Ms: no latency rule. */
    latencyBudgetMs: z.number().positive().nullable().default(null),
    /**
     * Slow-call rate: a completed call slower than this counts as slow, and the breaker trips when slow calls are
     * slowCallRatio or more of the window's latency samples (at least latencyMinSamples of them). A probe slower
     * than this fails. null: off. Tile renders take milliseconds to a few seconds (a metatile); a renderer
     * answering in 10 s or more is drowning, and the header timeout (15 s by default) fails slower calls anyway.
     */
    // At most 100 s: the latency histogram's last bound (slower calls share one bucket).
    slowCallMs: z.number().positive().max(100_000).nullable().default(10_000),
    slowCallRatio: z.number().gt(0).max(1).default(0.5),
    /** The latency rule needs this many latency samples in the window (besides minSamples). */
    latencyMinSamples: ms(1).default(20),
    /** Trip when permanent (request's-fault) outcomes reach this count ... */
    permanentSurgeCount: ms(1).default(50),
    /** ... and this share of all health-relevant samples. */
    permanentSurgeRatio: z.number().gt(0).max(1).default(0.5),
    /** First cooldown after a trip. */
    cooldownMs: ms(1).default(30_000),
    /** Cooldowns vary by +/- this fraction, so a fleet's probes do not line up. */
    cooldownJitter: fraction.lt(1).default(0.2),
    /**
     * A failure that came with a Retry-After (a 503 asking to wait) pauses the whole fleet until then, as a 429's
     * wait does (capped at the longest cooldown; nothing counts less as a failure): the server is spared by the
     * breaker, not by each call sleeping on its own.
     */
    retryAfterPauses: z.boolean().default(true),
    /** Each consecutive open multiplies the cooldown by this ... */
    cooldownMultiplier: z.number().min(1).default(2),
    /** ... up to cooldownMs times this factor (the cap). */
    cooldownMaxFactor: z.number().min(1).default(8),
    /** Each full period of this length spent closed forgives one consecutive open (without flapWindowMs). */
    cooldownDecayMs: ms(1).default(300_000),
    /**
     * One incident is one open: failed probes lengthen it (probeBackoff), and only a trip within this long of
     * the last close (a server that flaps) grows the next cooldown; a later trip starts from cooldownMs again.
     * null: every open counts, failed probes too, and cooldownDecayMs forgives them. Default: twice cooldownMs.
     */
    flapWindowMs: ms(1).nullable().optional(),
    /**
     * After a failed probe, the next probe comes after at most this long (+/- cooldownJitter), however long
     * the grown cooldown: the cooldown decides when testing starts, then the probes test often, so traffic
     * returns within seconds of the server's recovery. null: a failed probe waits the full grown cooldown.
     * Default: cooldownMs, at most 5 s.
     */
    probeIntervalMs: ms(1).nullable().optional(),
    /**
     * Each failed trial in a row multiplies the wait before the next (probeIntervalMs) by this, up to
     * probeIntervalMs x cooldownMaxFactor, so an endpoint that stays down is tried less and less often. 1: the
     * wait stays probeIntervalMs.
     */
    probeBackoff: z.number().min(1).max(16).default(2),
    /** A probe token expires this long after it is granted. */
    probeLeaseMs: ms(1).default(30_000),
    /** Probe tokens outstanding at once, fleet-wide. */
    maxConcurrentProbes: ms(1).max(100).default(1),
    /** Successful probes that close the breaker (in a row, or among probeTrials trials). */
    probesToClose: ms(1).max(1_000).default(3),
    /**
     * k-of-n trials: a half-open round closes after probesToClose successes among at most this many probes,
     * and reopens only once that can no longer happen. null: every probe must succeed (probesToClose in a row).
     */
    probeTrials: ms(1).max(1_000).nullable().default(null),
    /** After closing, allowance grows linearly from rampFloor to 1 over this time (0: no ramp). */
    rampMs: ms(0).default(10_000),
    rampFloor: z.number().gt(0).max(1).default(0.1),
    /**
     * Fleet-wide request rate to this endpoint (requests/s), shared among the workers reporting to the
     * entity; during a ramp, scaled by the ramp's allowance. null: no limit.
     */
    maxRequestsPerSecond: z.number().gt(0).max(100_000).nullable().default(null),
  })
  .strict()
  .transform(({ bucketMs, fastMinSamples, flapWindowMs, probeIntervalMs, ...c }) => ({
    ...c,
    bucketMs: bucketMs ?? Math.max(250, Math.ceil(c.windowMs / 120)),
    fastMinSamples: fastMinSamples ?? 2 * c.minSamples,
    flapWindowMs: flapWindowMs === undefined ? Math.min(2 * c.cooldownMs, MAX_POLICY_DURATION_MS) : flapWindowMs,
    probeIntervalMs:
      probeIntervalMs === undefined ? Math.min(c.cooldownMs, DEFAULT_PROBE_INTERVAL_MS) : probeIntervalMs,
  }))
  .superRefine((c, ctx) => {
    if (c.fastMinSamples < c.minSamples) {
      ctx.addIssue({
        code: 'custom',
        path: ['fastMinSamples'],
        input: c.fastMinSamples,
        message: `must be >= minSamples (${c.minSamples})`,
      });
    }
    if (c.probeTrials !== null && c.probeTrials < c.probesToClose) {
      ctx.addIssue({
        code: 'custom',
        path: ['probeTrials'],
        input: c.probeTrials,
        message: `must be >= probesToClose (${c.probesToClose}) or null`,
      });
    }
    if (c.fastWindowMs > c.windowMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['fastWindowMs'],
        input: c.fastWindowMs,
        message: `must be <= windowMs (${c.windowMs})`,
      });
    }
    if (c.bucketMs > c.windowMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['bucketMs'],
        input: c.bucketMs,
        message: `must be <= windowMs (${c.windowMs})`,
      });
    } else if (c.windowMs / c.bucketMs > 600) {
      ctx.addIssue({
        code: 'custom',
        path: ['bucketMs'],
        input: c.bucketMs,
        message: `must be >= windowMs / 600 (${Math.ceil(c.windowMs / 600)}) so the window holds at most 600 buckets`,
      });
    }
  });

export type PolicyConfig = z.output<typeof policyConfigSchema>;
/** What a user writes: every field optional. */
export type PolicyConfigInput = z.input<typeof policyConfigSchema>;

/** The most samples a sample floor may ask for (a report's count is at most 1,000,000 too). */
export const MAX_POLICY_SAMPLES = 1_000_000;

/**
 * Every setting's upper bound, where the schema above has none of its own (those are in docs/policy.md too;
 * bucketMs and fastWindowMs are at most windowMs). `parsePolicyConfig` checks them, with the grown cooldown's.
 */
export const POLICY_BOUNDS = {
  // Twice minSamples by default, so twice its bound.
  fastMinSamples: { max: 2 * MAX_POLICY_SAMPLES, label: '2,000,000' },
  minSamples: { max: MAX_POLICY_SAMPLES, label: '1,000,000' },
  volumeFloor: { max: MAX_POLICY_SAMPLES, label: '1,000,000' },
  smallFleetFloor: { max: MAX_POLICY_SAMPLES, label: '1,000,000' },
  healthyP95Ms: { max: 3_600_000, label: '1 h' },
  latencyBudgetFactor: { max: 100, label: '100' },
  latencyBudgetMs: { max: 3_600_000, label: '1 h' },
  latencyMinSamples: { max: MAX_POLICY_SAMPLES, label: '1,000,000' },
  permanentSurgeCount: { max: MAX_POLICY_SAMPLES, label: '1,000,000' },
  cooldownMs: { max: MAX_POLICY_DURATION_MS, label: '30 days' },
  cooldownMultiplier: { max: 100, label: '100' },
  cooldownMaxFactor: { max: 1_000, label: '1,000' },
  cooldownDecayMs: { max: MAX_POLICY_DURATION_MS, label: '30 days' },
  flapWindowMs: { max: MAX_POLICY_DURATION_MS, label: '30 days' },
  probeIntervalMs: { max: MAX_POLICY_DURATION_MS, label: '30 days' },
  // A probe is one call: an hour is far past any timeout, and a lease its holder never returns blocks the round.
  probeLeaseMs: { max: 3_600_000, label: '1 h' },
  rampMs: { max: MAX_POLICY_DURATION_MS, label: '30 days' },
} as const satisfies Partial<Record<keyof PolicyConfig, { max: number; label: string }>>;

/**
 * Each setting of `config` (a whole configuration or the fields a configure sets) above its bound, as
 * `field: must be at most N (label) (got value)`; and, where both factors are there, a grown cooldown or trial
 * wait (x cooldownMaxFactor) longer than MAX_POLICY_DURATION_MS, which no durable timer should wait. Values of
 * the wrong type are the schema's to name.
 */
export function policyBoundsIssues(config: Readonly<Record<string, unknown>>): string[] {
  const issues: string[] = [];
  for (const [field, { max, label }] of Object.entries(POLICY_BOUNDS)) {
    const v = config[field];
    if (typeof v === 'number' && v > max) issues.push(`${field}: must be at most ${max} (${label}) (got ${v})`);
  }
  const factor = config['cooldownMaxFactor'];
  if (typeof factor !== 'number' || !(factor <= POLICY_BOUNDS.cooldownMaxFactor.max)) return issues;
  for (const field of ['cooldownMs', 'probeIntervalMs'] as const) {
    const v = config[field];
    if (typeof v === 'number' && v <= POLICY_BOUNDS[field].max && v * factor > MAX_POLICY_DURATION_MS) {
      issues.push(
        `${field}: x cooldownMaxFactor (${factor}) must be at most ${MAX_POLICY_DURATION_MS} (30 days), the longest it may grow to (got ${v})`,
      );
    }
  }
  return issues;
}

/** Throws a ConfigError naming every setting of `config` above its bound (policyBoundsIssues). */
export function checkPolicyBounds(config: Readonly<Record<string, unknown>>, subject = 'breaker config'): void {
  const issues = policyBoundsIssues(config);
  if (issues.length) throw new ConfigError(subject, issues);
}

/** Validates and fills defaults; throws ConfigError naming each bad field and the value received. */
export function parsePolicyConfig(input: unknown = {}): PolicyConfig {
  const config = parseOrThrow(policyConfigSchema, input ?? {}, 'breaker config');
  checkPolicyBounds(config);
  return config;
}

export const DEFAULT_POLICY_CONFIG: PolicyConfig = parsePolicyConfig({});

/**
 * How far back the fast window may reach when the window's p95 latency is `p95Ms` (null: unknown): fastWindowMs,
 * or that p95 when fastWindowFollowsLatency and it is longer, at most a quarter of windowMs. Off (0) stays off.
 * `config` is the one in force (floorsFor's): with fastWindowFollowsFloor its minSamples is the floor that
 * latencySamples must reach.
 */
export function fastWindowSpanMs(config: PolicyConfig, p95Ms: number | null, latencySamples: number): number {
  const needed = config.fastWindowFollowsFloor
    ? Math.min(config.latencyMinSamples, config.minSamples)
    : config.latencyMinSamples;
  if (config.fastWindowMs === 0 || !config.fastWindowFollowsLatency || p95Ms === null || latencySamples < needed)
    return config.fastWindowMs;
  // At most a quarter of the window: the fast window judges the newest samples, not a slow endpoint's whole window.
  return Math.max(config.fastWindowMs, Math.min(Math.floor(config.windowMs / 4), Math.ceil(p95Ms)));
}

/** The slow-call threshold in ms, or null when off. */
export function slowCallMs(config: PolicyConfig): number | null {
  return config.slowCallMs;
}

/**
 * The slowest a successful probe may be and still count as one (null: any): the latency budget or the
 * slow-call threshold, whichever is lower. Closing on a slower probe would trip the rule again at once.
 */
export function probeLatencyLimitMs(config: PolicyConfig): number | null {
  const limits = [latencyBudgetMs(config), slowCallMs(config)].filter((x): x is number => x !== null);
  return limits.length ? Math.min(...limits) : null;
}

/** The latency budget in ms, or null when no latency rule applies. */
export function latencyBudgetMs(config: PolicyConfig): number | null {
  if (config.latencyBudgetMs !== null) return config.latencyBudgetMs;
  if (config.healthyP95Ms !== null) return config.healthyP95Ms * config.latencyBudgetFactor;
  return null;
}
