import type { DrillInput } from '../messages/drill';

/**
 * The drill `npm start` runs while the mosaic main job is being built: a scripted outage on seconds-long
 * timers, so it finishes in about ten seconds on a real dev server.
 */
export function demoDrill(): DrillInput {
  return {
    key: 'http://127.0.0.1:8080/demo',
    upsertSearchAttributes: true,
    config: {
      minSamples: 10,
      cooldownMs: 2_000,
      cooldownJitter: 0.2,
      probesToClose: 2,
      probeLeaseMs: 5_000,
      rampMs: 2_000,
    },
    steps: [
      { atMs: 0, event: { type: 'report', counts: { success: 40 }, latency: [] } },
      { atMs: 1_000, event: { type: 'report', counts: { success: 5, transient: 35, 'service-exception': 15 } } },
      { atMs: 1_500, event: { type: 'probe-request', requestId: 'a', requester: 'worker-1' } },
      { atMs: 4_000, event: { type: 'probe-request', requestId: 'b', requester: 'worker-2' } },
      { atMs: 4_100, event: { type: 'probe-request', requestId: 'c', requester: 'worker-3' } },
      { atMs: 4_500, event: { type: 'probe-result', generation: 1, outcome: 'transient' } },
      { atMs: 9_500, event: { type: 'probe-request', requestId: 'd', requester: 'worker-3' } },
      { atMs: 9_700, event: { type: 'probe-result', generation: 2, outcome: 'success' } },
      { atMs: 9_800, event: { type: 'probe-request', requestId: 'e', requester: 'worker-1' } },
      { atMs: 10_000, event: { type: 'probe-result', generation: 3, outcome: 'success' } },
    ],
    settleMs: 500,
  };
}
