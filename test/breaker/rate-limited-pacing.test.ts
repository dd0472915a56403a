import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  breakerView,
  initialState,
  maxCooldownMs,
  migratePolicyState,
  parsePolicyConfig,
  pausedForMs,
  permitFor,
  step,
  windowFigures,
  type PolicyEvent,
  type PolicyState,
  type StepResult,
} from '../../src/breaker';

/** An arbitrary instant far from today: 2001-03-04 05:06:07 UTC. */
const T0 = Date.UTC(2001, 2, 4, 5, 6, 7);
const MID = 0.5;

const fresh = (): PolicyState => initialState(parsePolicyConfig({ minSamples: 10 }));
const report = (
  state: PolicyState,
  now: number,
  counts: Extract<PolicyEvent, { type: 'report' }>['counts'],
  extra: Partial<Extract<PolicyEvent, { type: 'report' }>> = {},
): StepResult => step(state, { type: 'report', counts, ...extra }, now, MID);

describe("a 429's Retry-After paces the whole fleet (policy)", () => {
  test('a report of 429s with a wait sets pacedUntil in the state and the view, with no transition and no failure counted', () => {
    const r = report(fresh(), T0, { success: 3, 'rate-limited': 2 }, { rateLimitedForMs: 2_000 });
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.pacedUntil, T0 + 2_000);
    const v = breakerView(r.state);
    assert.equal(v.state, 'closed');
    assert.equal(v.pacedUntil, T0 + 2_000);
    assert.equal(pausedForMs(v, T0 + 500), 1_500);
    assert.equal(pausedForMs(v, T0 + 2_000), 0);
    // The breaker itself lets traffic through: the pause is the guard's to honour, not a refusal.
    assert.equal(permitFor(v, T0 + 500).allow, true);
    const f = windowFigures(r.state, T0);
    assert.deepEqual([f.failures, f.rateLimited, f.successes], [0, 2, 3]);
  });

  test('429s never trip the breaker, however many, and the latest wait wins', () => {
    let s = fresh();
    for (let i = 0; i < 50; i++) {
      const r = report(s, T0 + i * 100, { 'rate-limited': 20 }, { rateLimitedForMs: i === 10 ? 9_000 : 2_000 });
      assert.deepEqual(r.transitions, [], `report ${i}`);
      s = r.state;
    }
    assert.equal(s.phase, 'closed');
    // The 9 s wait asked at T0 + 1 s ends after every later 2 s one.
    assert.equal(s.pacedUntil, T0 + 1_000 + 9_000);
    // A shorter wait asked later does not shorten it.
    assert.equal(
      report(s, T0 + 5_100, { 'rate-limited': 1 }, { rateLimitedForMs: 1_000 }).state.pacedUntil,
      T0 + 10_000,
    );
  });

  test('the wait is capped at the longest cooldown (a server asking for a day does not park the fleet for one)', () => {
    const r = report(fresh(), T0, { 'rate-limited': 1 }, { rateLimitedForMs: 86_400_000 });
    assert.equal(r.state.pacedUntil, T0 + maxCooldownMs(r.state.config));
  });

  test('a wait without a 429 counted, or not a positive number, paces nothing', () => {
    for (const extra of [{ rateLimitedForMs: 2_000 }, {}])
      assert.equal(report(fresh(), T0, { success: 4 }, extra).state.pacedUntil ?? null, null);
    for (const ms of [0, -5, Number.NaN, Number.POSITIVE_INFINITY])
      assert.equal(
        report(fresh(), T0, { 'rate-limited': 1 }, { rateLimitedForMs: ms }).state.pacedUntil ?? null,
        null,
        String(ms),
      );
    // Without retryAfterPauses a Retry-After with failures is the cooldown hint, not a pause.
    const hinted = report(
      initialState(parsePolicyConfig({ minSamples: 10, retryAfterPauses: false })),
      T0,
      { transient: 2 },
      { retryAfterMs: 5_000 },
    );
    assert.equal(hinted.state.pacedUntil ?? null, null);
    assert.equal(hinted.state.retryAfterHintUntil, T0 + 5_000);
  });

  test('a pause that has ended is forgotten at the next event; a reset ends one at once', () => {
    const paced = report(fresh(), T0, { 'rate-limited': 1 }, { rateLimitedForMs: 2_000 }).state;
    assert.equal(step(paced, { type: 'tick' }, T0 + 1_999, MID).state.pacedUntil, T0 + 2_000);
    const later = step(paced, { type: 'tick' }, T0 + 2_000, MID).state;
    assert.equal(later.pacedUntil, null);
    assert.equal(breakerView(later).pacedUntil, undefined);
    assert.equal(step(paced, { type: 'reset' }, T0 + 500, MID).state.pacedUntil, null);
  });

  test('a state carried from a release before pauses (no pacedUntil field) is migrated to none', () => {
    const { pacedUntil: _none, ...old } = fresh();
    const r = report(migratePolicyState({ ...old, version: 1 }), T0, { success: 5 });
    assert.equal(r.state.pacedUntil, null);
    assert.equal('pacedUntil' in breakerView(r.state), false);
  });
});

describe("a failure's Retry-After (retryAfterPauses)", () => {
  const failing = (input = {}) => initialState(parsePolicyConfig({ minSamples: 50, ...input }));

  test('pauses the fleet as a 429 does, and the failures still count', () => {
    const r = step(
      failing({ retryAfterPauses: true }),
      { type: 'report', counts: { transient: 8 }, retryAfterMs: 20_000 },
      T0,
      0.5,
    );
    assert.equal(r.state.pacedUntil, T0 + 20_000);
    assert.equal(breakerView(r.state).pacedUntil, T0 + 20_000);
    assert.deepEqual(r.transitions, []);
    assert.equal(windowFigures(r.state, T0).failures, 8);
  });

  test('on unless named', () => {
    const r = step(failing(), { type: 'report', counts: { transient: 8 }, retryAfterMs: 20_000 }, T0, 0.5);
    assert.equal(r.state.pacedUntil, T0 + 20_000);
  });

  test('without it (false) only the next cooldown hears of it', () => {
    const r = step(
      failing({ retryAfterPauses: false }),
      { type: 'report', counts: { transient: 8 }, retryAfterMs: 20_000 },
      T0,
      0.5,
    );
    assert.equal(r.state.pacedUntil ?? null, null);
    assert.equal(r.state.retryAfterHintUntil, T0 + 20_000);
  });

  test('a Retry-After on successes alone pauses nothing', () => {
    const r = step(
      failing({ retryAfterPauses: true }),
      { type: 'report', counts: { success: 8 }, retryAfterMs: 20_000 },
      T0,
      0.5,
    );
    assert.equal(r.state.pacedUntil ?? null, null);
  });
});
