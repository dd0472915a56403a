import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { initialState, parsePolicyConfig, step, type PolicyConfigInput, type PolicyState } from '../../src/breaker';

const T0 = 1_000_000;

/** Trips, waits out the cooldown, takes a probe token and fails it: the cooldown that follows. */
function cooldownAfterFailedProbe(input: PolicyConfigInput): { first: number; afterProbe: number } {
  let s: PolicyState = initialState(parsePolicyConfig({ cooldownJitter: 0, ...input }));
  let r = step(s, { type: 'report', counts: { transient: 20 } }, T0, 0.5);
  s = r.state;
  const first = r.transitions.find((t) => t.to === 'open')!.cooldownMs!;
  const halfOpenAt = s.cooldownUntil!;
  r = step(s, { type: 'probe-request', requestId: 'p1', requester: 'w' }, halfOpenAt, 0.5);
  assert.equal(r.decision?.kind, 'granted');
  const generation = r.decision.kind === 'granted' ? r.decision.token.generation : -1;
  r = step(r.state, { type: 'probe-result', generation, outcome: 'transient' }, halfOpenAt + 100, 0.5);
  const reopened = r.transitions.find((t) => t.reason === 'probe-failed')!;
  return { first, afterProbe: reopened.cooldownMs! };
}

describe('the probe cadence after a failed probe', () => {
  test('without probeIntervalMs a failed probe waits the grown cooldown (twice the first)', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 30_000 }), { first: 30_000, afterProbe: 60_000 });
  });

  test('with probeIntervalMs the next probe comes after that interval, however long the grown cooldown', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 30_000, probeIntervalMs: 5_000 }), { first: 30_000, afterProbe: 5_000 });
  });

  test('the interval never lengthens a cooldown shorter than it', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 1_000, cooldownMultiplier: 1, probeIntervalMs: 5_000 }), { first: 1_000, afterProbe: 1_000 });
  });

  test('a trip from closed still waits the full cooldown: the interval only paces testing', () => {
    const { first } = cooldownAfterFailedProbe({ cooldownMs: 30_000, probeIntervalMs: 5_000 });
    assert.equal(first, 30_000);
  });
});
