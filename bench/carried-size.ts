#!/usr/bin/env node
/**
 * bench:carried-size: the breaker entity's continue-as-new payload, as Temporal encodes it,
 * in the form runs carried before the bound (everything) and in the bounded form (carry.ts), for
 *   default   the default configuration at capacity: a full 30 s window of a 60-worker fleet's reports, the
 *             default log of 500 transitions with their figures, 256 probe decisions, 60 reporters;
 *   largest   the largest state the configuration allows (test/helpers/carried-worst-case.ts).
 * Prints one line per state: `carried: state=<name> before-bytes=<int> bytes=<int> transitions=<int>`.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import {
  histogramOf,
  initialState,
  parsePolicyConfig,
  record,
  type ProbeDecision,
  type TransitionRecord,
} from '../src/breaker';
import type { CarriedState, EntityInput } from '../src/messages/breaker';
import { carry, restore } from '../src/workflows/breaker-entity/carry';
import { worstCarried, WORST_CONFIG } from '../test/helpers/carried-worst-case';

const T0 = Date.UTC(2001, 2, 3, 4, 5, 6);

function defaultAtCapacity(): CarriedState {
  const config = parsePolicyConfig({});
  let window = initialState(config).window;
  // 60 workers, one report a second each, 150 ms tiles.
  for (let t = T0 - config.windowMs; t <= T0; t += 1_000 / 60) {
    window = record(
      window,
      t,
      { success: 7, transient: 1 },
      histogramOf([90, 120, 150, 150, 180, 200, 220, 260]),
      config,
    );
  }
  const figures = {
    successes: 1_400,
    failures: 1_600,
    transient: 1_600,
    serviceException: 0,
    permanent: 0,
    neutral: 0,
    rateLimited: 0,
    n: 3_000,
    samples: 3_000,
    failureRatio: 0.5333,
    latencySamples: 3_000,
    p95Ms: 251.3,
  };
  const guard = (i: number) => `worker-${4_000 + i}@tiles-worker-7f9c6d5b8-x2k4q-${(0xabc000 + i).toString(16)}`;
  // A flapping day: trip, cooldown, failed probe, ... (the default log keeps 500).
  const kinds: Pick<TransitionRecord, 'from' | 'to' | 'reason' | 'detail'>[] = [
    {
      from: 'closed',
      to: 'open',
      reason: 'failure-ratio',
      detail: '1600/3000 failed (53.3% >= 50%; 1600 transient, 0 service-exception) in the newest 40 samples',
    },
    { from: 'open', to: 'half-open', reason: 'cooldown-elapsed', detail: 'cooldown of 30000 ms elapsed' },
    { from: 'half-open', to: 'open', reason: 'probe-failed', detail: `probe 17 by ${guard(3)} failed: transient` },
  ];
  const log = Array.from({ length: 500 }, (_, i): TransitionRecord => {
    const k = kinds[i % kinds.length]!;
    return { at: T0 - i * 30_000, ...k, ...(k.to === 'open' ? { figures, cooldownMs: 30_000 } : {}) };
  });
  const probes = [
    { generation: 300, requestId: `${guard(1)}/${T0}/7`, holder: guard(1), grantedAt: T0, leaseUntil: T0 + 30_000 },
  ];
  const decisions: [string, ProbeDecision][] = Array.from({ length: 256 }, (_, i) => [
    `${guard(i % 60)}/${T0 - i}/${i}`,
    { kind: 'denied', reason: 'busy', retryAfterMs: 12_345 },
  ]);
  return {
    policy: { ...initialState(config), window, probes, lastGeneration: 300 },
    log,
    lastReportAt: T0,
    lastTransitionAt: T0,
    decisions,
    counters: { reports: 1_234_567, probeRequests: 23_456, selfProbes: 345, ignoredResults: 12, continuedAsNew: 617 },
    searchAttributesOn: true,
    reporters: Array.from({ length: 60 }, (_, i) => [guard(i), T0 - i * 10]),
    inFlight: Array.from({ length: 60 }, (_, i) => [guard(i), T0 - i * 10, 4]),
  };
}

function bytes(config: EntityInput['config'], carried: CarriedState): number {
  const input: EntityInput = {
    key: 'https://tiles.example.com:443',
    ...(config ? { config } : {}),
    probe: { url: 'https://tiles.example.com/0/0/0.png' },
    carried,
  };
  return defaultPayloadConverter.toPayload(input).data!.length;
}

for (const [name, config, old] of [
  ['default', undefined, defaultAtCapacity()],
  ['largest', WORST_CONFIG, worstCarried(T0)],
] as const) {
  const bounded = carry(restore(old), T0);
  console.log(
    `carried: state=${name} before-bytes=${bytes(config, old)} bytes=${bytes(config, bounded)} transitions=${restore(bounded).log.length}`,
  );
}
