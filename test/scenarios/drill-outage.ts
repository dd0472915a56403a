import type { DrillInput } from '../../src/messages/drill';

const MIN = 60_000;

/**
 * A recorded-style outage: healthy traffic, a burst of 5xx that trips the breaker, a probe that fails
 * (cooldown doubles), a stale probe result from the first round, then two good probes that close it.
 * Cooldowns are minutes long, so on the time-skipping server it shows timers being skipped.
 */
export function outageDrill(): DrillInput {
  return {
    key: 'https://tiles.example.test:443',
    config: {
      cooldownMs: 5 * MIN,
      // A failed probe waits the whole grown cooldown, not the probe cadence: the doubling is what it shows.
      probeIntervalMs: null,
      cooldownJitter: 0.2,
      minSamples: 20,
      probesToClose: 2,
      probeLeaseMs: MIN,
      rampMs: 30_000,
    },
    steps: [
      { atMs: 0, event: { type: 'report', counts: { success: 30 } } },
      { atMs: 10_000, event: { type: 'report', counts: { transient: 40 } } },
      { atMs: 20_000, event: { type: 'probe-request', requestId: 'w1-a', requester: 'worker-1' } },
      { atMs: 8 * MIN, event: { type: 'probe-request', requestId: 'w1-b', requester: 'worker-1' } },
      { atMs: 8 * MIN + 1_000, event: { type: 'probe-request', requestId: 'w2-a', requester: 'worker-2' } },
      { atMs: 8 * MIN + 2_000, event: { type: 'probe-result', generation: 1, outcome: 'transient' } },
      { atMs: 25 * MIN, event: { type: 'probe-request', requestId: 'w2-b', requester: 'worker-2' } },
      { atMs: 25 * MIN + 1_000, event: { type: 'probe-result', generation: 1, outcome: 'success' } },
      { atMs: 25 * MIN + 2_000, event: { type: 'probe-result', generation: 2, outcome: 'success' } },
      { atMs: 25 * MIN + 3_000, event: { type: 'probe-request', requestId: 'w3-a', requester: 'worker-3' } },
      { atMs: 25 * MIN + 4_000, event: { type: 'probe-result', generation: 3, outcome: 'success' } },
    ],
    settleMs: MIN,
  };
}
