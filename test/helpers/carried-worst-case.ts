/**
 * The largest state a breaker entity can hold, in the carried form of runs from before the bounded carry
 * (what a run that continued as new before it passes on): the configuration schema's upper bounds (600
 * buckets, 100 probe tokens out), every bucket busy with a latency histogram using every counter, the longest
 * log the entity options allow (5,000) with each trip's figures and long operator texts, 256 probe decisions,
 * a thousand reporters with calls in flight.
 */
import {
  LATENCY_BUCKETS,
  initialState,
  parsePolicyConfig,
  type PolicyConfigInput,
  type ProbeDecision,
  type TransitionRecord,
  type WindowFigures,
} from '../../src/breaker';
import type { CarriedState } from '../../src/messages/breaker';

/** The configuration with the largest state: 600 buckets of the longest window, 100 concurrent probes. */
export const WORST_CONFIG: PolicyConfigInput = {
  windowMs: 3_600_000,
  bucketMs: 6_000,
  fastWindowMs: 3_600_000,
  maxConcurrentProbes: 100,
  probesToClose: 1_000,
  minSamples: 1_000_000,
  maxRequestsPerSecond: 100_000,
  healthyP95Ms: 123.456,
};

/** An id as a guard makes them (src/activities/guard/reporter-id.ts, probe-requests.ts), at its longest. */
const guardId = (i: number) =>
  `worker-${1_000_000 + i}@ip-10-123-234-45.eu-central-1.compute.internal-${(0xdeadbeef + i).toString(16)}`;

export function worstCarried(now: number): CarriedState {
  const config = parsePolicyConfig(WORST_CONFIG);
  const buckets = config.windowMs / config.bucketMs;
  const window = Array.from({ length: buckets }, (_, i) => ({
    start: Math.floor(now / config.bucketMs) * config.bucketMs - (buckets - 1 - i) * config.bucketMs,
    counts: {
      success: 987_654,
      transient: 876_543,
      'service-exception': 765_432,
      permanent: 654_321,
      neutral: 543_210,
      'rate-limited': 432_109,
    },
    latency: Array.from({ length: LATENCY_BUCKETS }, (_, j) => 100_000 + i * 7 + j),
  }));
  const probes = Array.from({ length: config.maxConcurrentProbes }, (_, i) => ({
    generation: 1_000_000 + i,
    requestId: `${guardId(i)}/${now}/${i}`,
    holder: guardId(i),
    grantedAt: now,
    leaseUntil: now + config.probeLeaseMs,
  }));
  const policy = {
    ...initialState(config),
    window,
    probes,
    lastGeneration: 1_000_099,
    phase: 'half-open' as const,
    consecutiveOpens: 7,
    probeSuccesses: 999,
  };
  const figures: WindowFigures = {
    successes: 987_654_321,
    failures: 876_543_210,
    transient: 765_432_109,
    serviceException: 111_111_101,
    permanent: 654_321_098,
    neutral: 543_210_987,
    rateLimited: 432_109_876,
    n: 1_864_197_531,
    samples: 2_518_518_629,
    failureRatio: 0.4701882352941176,
    latencySamples: 1_864_197_531,
    p95Ms: 1234.5678901234,
  };
  const text = 'x'.repeat(2_000);
  const log: TransitionRecord[] = Array.from({ length: 5_000 }, (_, i) => ({
    at: now - i * 1_000,
    from: 'half-open',
    to: 'open',
    reason: 'probe-failed',
    detail: `probe ${i} by ${guardId(i)} failed: transient; ${text}`,
    figures,
    cooldownMs: 240_000,
    actor: text,
    sender: { identity: text, user: text, host: text },
  }));
  const decisions: [string, ProbeDecision][] = Array.from({ length: 256 }, (_, i) => [
    `${guardId(i)}/${now}/${i}`,
    { kind: 'granted', token: probes[i % probes.length]! },
  ]);
  return {
    policy,
    log,
    lastReportAt: now,
    lastTransitionAt: now,
    decisions,
    counters: {
      reports: 9_999_999_999,
      lateReports: 9_999_999,
      stalled: 9_999_999,
      probeRequests: 9_999_999,
      selfProbes: 9_999_999,
      ignoredResults: 9_999_999,
      continuedAsNew: 9_999_999,
    },
    searchAttributesOn: true,
    reporters: Array.from({ length: 1_000 }, (_, i) => [guardId(i), now - (i % 5_000)]),
    inFlight: Array.from({ length: 1_000 }, (_, i) => [guardId(i), now - (i % 5_000), 1_000]),
    operatorSet: true,
  };
}
