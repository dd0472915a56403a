import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  floorsFor,
  initialState,
  migratePolicyState,
  parsePolicyConfig,
  step,
  type PolicyConfigInput,
  type PolicyState,
} from '../../src/breaker';

const T0 = 1_000_000;
const fresh = (input: PolicyConfigInput = {}): PolicyState => initialState(parsePolicyConfig(input));
/** 30 s of a healthy endpoint (200 successes a second over the window), then the report under test. */
function warmed(state: PolicyState, concurrency?: number): PolicyState {
  let s = state;
  for (let t = 0; t < 30; t++)
    s = step(
      s,
      { type: 'report', counts: { success: 200 }, ...(concurrency !== undefined ? { concurrency } : {}) },
      T0 + t * 1_000,
      0.5,
    ).state;
  return s;
}

describe('sample floors that follow the fleet concurrency', () => {
  test('floorsFor lowers both floors to the concurrency, never below volumeFloor, and leaves them alone when unknown or off', () => {
    // Without smallFleetFloor, which takes a fleet below volumeFloor further down (the next test).
    const c = parsePolicyConfig({ smallFleetFloor: null });
    assert.equal(floorsFor(c, undefined), c);
    assert.equal(floorsFor(c, 100), c, 'a fleet that can reach the floors keeps them');
    const eight = floorsFor(c, 8);
    assert.equal(eight.minSamples, 8);
    assert.equal(eight.fastMinSamples, 8);
    const one = floorsFor(c, 1);
    assert.equal(one.minSamples, 5, 'volumeFloor 5 by default');
    assert.equal(floorsFor(c, 30).minSamples, 20, 'minSamples is only lowered, never raised');
    assert.equal(floorsFor(c, 30).fastMinSamples, 30);
    const off = parsePolicyConfig({ volumeFloor: null });
    assert.equal(floorsFor(off, 1), off);
  });

  test('a fleet with fewer calls in flight than volumeFloor: with smallFleetFloor its floors come down to what it can produce', () => {
    const c = parsePolicyConfig({ smallFleetFloor: 2 });
    assert.equal(floorsFor(c, 4).minSamples, 4, 'one worker at concurrency 4: 4 stalled calls can trip');
    assert.equal(floorsFor(c, 4).fastMinSamples, 4);
    assert.equal(floorsFor(c, 1).minSamples, 2, 'never below smallFleetFloor');
    assert.equal(floorsFor(c, 8).minSamples, 8, 'at or above volumeFloor nothing changes');
    const four = step(
      warmed(fresh({ smallFleetFloor: 2 }), 4),
      { type: 'report', counts: { transient: 4 }, concurrency: 4 },
      T0 + 31_000,
      0.5,
    );
    assert.equal(four.state.phase, 'open');
    assert.equal(
      step(
        warmed(fresh({ smallFleetFloor: null }), 4),
        { type: 'report', counts: { transient: 4 }, concurrency: 4 },
        T0 + 31_000,
        0.5,
      ).state.phase,
      'closed',
      'volumeFloor 5 alone: out of reach',
    );
    assert.equal(
      step(warmed(fresh(), 4), { type: 'report', counts: { transient: 4 }, concurrency: 4 }, T0 + 31_000, 0.5).state
        .phase,
      'open',
      'smallFleetFloor 3 by default: in reach',
    );
  });

  test('8 calls in flight that all fail trip a breaker that minSamples 20 would never trip on them', () => {
    // One worker, 8 calls at a time, a hang: 8 failures per report and nothing else in the newest second.
    const without = step(warmed(fresh()), { type: 'report', counts: { transient: 8 } }, T0 + 31_000, 0.5);
    assert.equal(without.state.phase, 'closed', 'without the concurrency the fast window never holds 40 samples');
    const withIt = step(
      warmed(fresh(), 8),
      { type: 'report', counts: { transient: 8 }, concurrency: 8 },
      T0 + 31_000,
      0.5,
    );
    assert.equal(withIt.state.phase, 'open');
    const t = withIt.transitions[0]!;
    assert.equal(t.reason, 'failure-ratio');
    assert.match(t.detail, /8\/8 failed/);
    assert.match(t.detail, /sample floors 8\/8: the fleet had 8 calls in flight/);
  });

  test('a few failures among successes in the same second still do not trip', () => {
    const r = step(
      warmed(fresh(), 8),
      { type: 'report', counts: { transient: 3, success: 40 }, concurrency: 8 },
      T0 + 31_000,
      0.5,
    );
    assert.equal(r.state.phase, 'closed');
  });

  test('volumeFloor null keeps the configured floors', () => {
    const r = step(
      warmed(fresh({ volumeFloor: null }), 8),
      { type: 'report', counts: { transient: 8 }, concurrency: 8 },
      T0 + 31_000,
      0.5,
    );
    assert.equal(r.state.phase, 'closed');
  });

  test('a state carried from a version without volumeFloor is migrated to volumeFloor 5', () => {
    const s = warmed(fresh(), 8);
    const { volumeFloor: _dropped, ...old } = s.config;
    const carried = migratePolicyState({ ...s, version: 1, config: old });
    assert.equal(carried.config.volumeFloor, 5);
    assert.equal(
      step(carried, { type: 'report', counts: { transient: 8 }, concurrency: 8 }, T0 + 31_000, 0.5).state.phase,
      'open',
    );
  });
});
