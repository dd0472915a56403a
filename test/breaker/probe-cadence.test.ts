import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  initialState,
  migratePolicyState,
  parsePolicyConfig,
  step,
  type CarriedPolicyState,
  type PolicyConfigInput,
  type PolicyState,
} from '../../src/breaker';

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
  test('without probeIntervalMs (null) a failed probe waits the grown cooldown (twice the first)', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 30_000, probeIntervalMs: null }), {
      first: 30_000,
      afterProbe: 60_000,
    });
  });

  test('unless named, probeIntervalMs is cooldownMs, at most 5 s', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 30_000 }), { first: 30_000, afterProbe: 5_000 });
    // The grown cooldown (4 s) would be shorter than 5 s: the interval is the 2 s cooldown.
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 2_000 }), { first: 2_000, afterProbe: 2_000 });
  });

  test('with probeIntervalMs the next probe comes after that interval, however long the grown cooldown', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 30_000, probeIntervalMs: 5_000 }), {
      first: 30_000,
      afterProbe: 5_000,
    });
  });

  test('the interval never lengthens a cooldown shorter than it', () => {
    assert.deepEqual(cooldownAfterFailedProbe({ cooldownMs: 1_000, cooldownMultiplier: 1, probeIntervalMs: 5_000 }), {
      first: 1_000,
      afterProbe: 1_000,
    });
  });

  test('a trip from closed still waits the full cooldown: the interval only paces testing', () => {
    const { first } = cooldownAfterFailedProbe({ cooldownMs: 30_000, probeIntervalMs: 5_000 });
    assert.equal(first, 30_000);
  });
});

/** Trips, then fails `failures` trials in a row: the cooldown after each (the trip's first). */
function cooldownsThroughFailedTrials(
  input: PolicyConfigInput,
  failures: number,
): { trip: number; afterTrials: number[]; state: PolicyState } {
  let r = step(
    initialState(parsePolicyConfig({ cooldownJitter: 0, ...input })),
    { type: 'report', counts: { transient: 20 } },
    T0,
    0.5,
  );
  const trip = r.transitions.find((t) => t.to === 'open')!.cooldownMs!;
  const afterTrials: number[] = [];
  for (let i = 0; i < failures; i++) {
    const at = r.state.cooldownUntil!;
    r = step(r.state, { type: 'probe-request', requestId: `p${i}`, requester: 'w' }, at, 0.5);
    const generation = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
    r = step(r.state, { type: 'probe-result', generation, outcome: 'transient' }, at + 100, 0.5);
    afterTrials.push(r.transitions.find((t) => t.reason === 'probe-failed')!.cooldownMs!);
  }
  return { trip, afterTrials, state: r.state };
}

describe('failed trials back off (probeBackoff)', () => {
  test('each failed trial in a row doubles the wait, up to probeIntervalMs x cooldownMaxFactor', () => {
    const { trip, afterTrials } = cooldownsThroughFailedTrials(
      { cooldownMs: 30_000, probeIntervalMs: 5_000, probeBackoff: 2 },
      6,
    );
    assert.equal(trip, 30_000);
    assert.deepEqual(afterTrials, [5_000, 10_000, 20_000, 40_000, 40_000, 40_000]);
  });

  test('never longer than the grown cooldown itself', () => {
    // cooldownMs 4 s: the grown cooldown (8, 16, 32, 32 s after the trip's 4 s) caps the trials' 5, 10, 20, 40 s
    // from the fourth on.
    const { afterTrials } = cooldownsThroughFailedTrials(
      { cooldownMs: 4_000, probeIntervalMs: 5_000, probeBackoff: 2 },
      5,
    );
    assert.deepEqual(
      afterTrials,
      [5_000, 10_000, 20_000, 32_000, 32_000].map((ms, i) => Math.min(ms, 4_000 * 2 ** (i + 1), 32_000)),
    );
  });

  test('probeBackoff 1 keeps every wait at probeIntervalMs', () => {
    assert.deepEqual(
      cooldownsThroughFailedTrials({ cooldownMs: 30_000, probeIntervalMs: 5_000, probeBackoff: 1 }, 4).afterTrials,
      [5_000, 5_000, 5_000, 5_000],
    );
  });

  test('unless named, probeBackoff is 2', () => {
    assert.deepEqual(
      cooldownsThroughFailedTrials({ cooldownMs: 30_000, probeIntervalMs: 5_000 }, 4).afterTrials,
      [5_000, 10_000, 20_000, 40_000],
    );
  });

  test('a close forgets the failed trials: the next incident starts again from probeIntervalMs', () => {
    const cfg = {
      cooldownMs: 30_000,
      probeIntervalMs: 5_000,
      probeBackoff: 2,
      probesToClose: 1,
      cooldownDecayMs: 1_000,
    };
    const { state } = cooldownsThroughFailedTrials(cfg, 3);
    assert.equal(state.failedTrials, 3);
    let r = step(state, { type: 'probe-request', requestId: 'ok', requester: 'w' }, state.cooldownUntil!, 0.5);
    const generation = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
    r = step(r.state, { type: 'probe-result', generation, outcome: 'success' }, state.cooldownUntil! + 50, 0.5);
    assert.equal(r.state.phase, 'closed');
    assert.equal(r.state.failedTrials, 0);
    // Trip again much later (the decay forgave the opens), fail one trial: 5 s again.
    const later = state.cooldownUntil! + 3_600_000;
    r = step(r.state, { type: 'report', counts: { transient: 20 } }, later, 0.5);
    const at = r.state.cooldownUntil!;
    r = step(r.state, { type: 'probe-request', requestId: 'again', requester: 'w' }, at, 0.5);
    const g2 = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
    r = step(r.state, { type: 'probe-result', generation: g2, outcome: 'transient' }, at + 100, 0.5);
    assert.equal(r.transitions.find((t) => t.reason === 'probe-failed')?.cooldownMs, 5_000);
  });

  test('a state carried from before the fields (no failedTrials, no probeBackoff) is migrated to keep every wait at probeIntervalMs', () => {
    const { state } = cooldownsThroughFailedTrials({ cooldownMs: 30_000, probeIntervalMs: 5_000 }, 1);
    const { failedTrials: _f, probeFailures: _p, ...old } = state;
    const { probeBackoff: _b, probeTrials: _t, slowCallMs: _s, slowCallRatio: _r, ...oldConfig } = old.config;
    const carried = JSON.parse(JSON.stringify({ ...old, version: 1, config: oldConfig })) as CarriedPolicyState;
    let r: { state: PolicyState } = { state: migratePolicyState(carried) };
    assert.deepEqual(
      [r.state.failedTrials, r.state.probeFailures, r.state.config.probeBackoff, r.state.config.probeIntervalMs],
      [0, 0, 1, 5_000],
    );
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const at = r.state.cooldownUntil!;
      const granted = step(r.state, { type: 'probe-request', requestId: `x${i}`, requester: 'w' }, at, 0.5);
      const generation = granted.decision?.kind === 'granted' ? granted.decision.token.generation : -1;
      const failed = step(granted.state, { type: 'probe-result', generation, outcome: 'transient' }, at + 100, 0.5);
      waits.push(failed.transitions.find((t) => t.reason === 'probe-failed')!.cooldownMs!);
      assert.ok(Number.isFinite(failed.state.cooldownUntil), `cooldownUntil ${failed.state.cooldownUntil}`);
      r = failed;
    }
    assert.deepEqual(waits, [5_000, 5_000, 5_000]);
  });

  test('a successful probe ends the run of failed trials: a server answering 2 probes in 3 is not backed off to the cap', () => {
    let r = step(
      initialState(
        parsePolicyConfig({
          cooldownJitter: 0,
          cooldownMs: 30_000,
          probeIntervalMs: 5_000,
          probeBackoff: 2,
          probesToClose: 3,
        }),
      ),
      { type: 'report', counts: { transient: 20 } },
      T0,
      0.5,
    );
    const waits: number[] = [];
    let id = 0;
    for (let round = 0; round < 4; round++) {
      for (const outcome of ['success', 'success', 'transient'] as const) {
        const at = r.state.phase === 'open' ? r.state.cooldownUntil! : (r.state.cooldownUntil ?? T0);
        const g = step(
          r.state,
          { type: 'probe-request', requestId: `q${++id}`, requester: 'w' },
          Math.max(at, T0 + id),
          0.5,
        );
        const generation = g.decision?.kind === 'granted' ? g.decision.token.generation : -1;
        r = step(g.state, { type: 'probe-result', generation, outcome }, Math.max(at, T0 + id) + 10, 0.5);
        const reopened = r.transitions.find((t) => t.reason === 'probe-failed');
        if (reopened) waits.push(reopened.cooldownMs!);
      }
    }
    assert.deepEqual(waits, [5_000, 5_000, 5_000, 5_000]);
  });
});

/** Trips, waits out the cooldown, then answers probes with `outcomes` in order: where the round ended. */
function round(
  input: PolicyConfigInput,
  outcomes: Array<'success' | 'transient'>,
): { ended: 'closed' | 'open' | 'half-open'; after: number; detail?: string; trials: string[] } {
  let r = step(
    initialState(parsePolicyConfig({ cooldownJitter: 0, cooldownMs: 1_000, ...input })),
    { type: 'report', counts: { transient: 20 } },
    T0,
    0.5,
  );
  let at = r.state.cooldownUntil!;
  const trials: string[] = [];
  for (const [i, outcome] of outcomes.entries()) {
    r = step(r.state, { type: 'probe-request', requestId: `p${i}`, requester: 'w' }, (at += 10), 0.5);
    const generation = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
    r = step(r.state, { type: 'probe-result', generation, outcome }, (at += 10), 0.5);
    trials.push(r.trial ?? 'none');
    const moved = r.transitions.find((t) => t.from === 'half-open');
    if (moved) return { ended: moved.to as 'closed' | 'open', after: i + 1, detail: moved.detail, trials };
  }
  return { ended: 'half-open', after: outcomes.length, trials };
}

describe('k-of-n half-open trials (probeTrials)', () => {
  const S = 'success' as const;
  const F = 'transient' as const;

  test('2 of at most 3: one failed trial among three does not reopen', () => {
    assert.deepEqual(round({ probesToClose: 2, probeTrials: 3 }, [S, F, S]).ended, 'closed');
    assert.deepEqual(round({ probesToClose: 2, probeTrials: 3 }, [F, S, S]).ended, 'closed');
    const r = round({ probesToClose: 2, probeTrials: 3 }, [S, F, S]);
    assert.equal(r.after, 3);
    assert.match(r.detail ?? '', /2 successful probes of 3 trials/);
    assert.deepEqual(r.trials, ['success', 'failure', 'success']);
  });

  test('2 of at most 3: a second failed trial reopens, as soon as two successes cannot be reached', () => {
    const r = round({ probesToClose: 2, probeTrials: 3 }, [F, F, S]);
    assert.deepEqual([r.ended, r.after], ['open', 2]);
    assert.match(r.detail ?? '', /2 of 3 trials failed/);
    assert.deepEqual(round({ probesToClose: 2, probeTrials: 3 }, [S, F, F]).ended, 'open');
  });

  test('without probeTrials any failed probe reopens: probesToClose in a row', () => {
    assert.deepEqual(
      [round({ probesToClose: 2 }, [S, F]).ended, round({ probesToClose: 2 }, [S, F]).after],
      ['open', 2],
    );
    assert.match(round({ probesToClose: 2 }, [S, S]).detail ?? '', /2 consecutive successful probes/);
  });

  test('a reopened round starts its count again', () => {
    let r = step(
      initialState(parsePolicyConfig({ cooldownJitter: 0, cooldownMs: 1_000, probesToClose: 2, probeTrials: 3 })),
      { type: 'report', counts: { transient: 20 } },
      T0,
      0.5,
    );
    let at = r.state.cooldownUntil!;
    for (const [i, outcome] of (['transient', 'transient'] as const).entries()) {
      r = step(r.state, { type: 'probe-request', requestId: `a${i}`, requester: 'w' }, (at += 10), 0.5);
      const generation = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
      r = step(r.state, { type: 'probe-result', generation, outcome }, (at += 10), 0.5);
    }
    assert.equal(r.state.phase, 'open');
    assert.equal(r.state.probeFailures, 0);
  });
});

/** Trips at `at`, fails one probe, then closes on `probesToClose` successful probes: the state, closed. */
function incident(s: PolicyState, at: number): { state: PolicyState; trip: number; afterProbe: number } {
  let r = step(s, { type: 'report', counts: { transient: 20 } }, at, 0.5);
  const trip = r.transitions.find((t) => t.to === 'open')!.cooldownMs!;
  let afterProbe = -1;
  for (let i = 0; r.state.phase !== 'closed'; i++) {
    const when = r.state.cooldownUntil ?? r.state.openedAt! + 1;
    r = step(r.state, { type: 'probe-request', requestId: `p${at}-${i}`, requester: 'w' }, when, 0.5);
    const generation = r.decision?.kind === 'granted' ? r.decision.token.generation : -1;
    r = step(
      r.state,
      { type: 'probe-result', generation, outcome: i === 0 ? 'transient' : 'success' },
      when + 100,
      0.5,
    );
    if (i === 0) afterProbe = r.transitions.find((t) => t.reason === 'probe-failed')!.cooldownMs!;
    assert.ok(i < 10, 'the incident closes');
  }
  return { state: r.state, trip, afterProbe };
}

describe('one incident is one open (flapWindowMs)', () => {
  // probeIntervalMs off: a failed probe's wait is the grown cooldown, as the incident counts it.
  const base = {
    cooldownMs: 30_000,
    cooldownJitter: 0,
    probesToClose: 1,
    cooldownDecayMs: 300_000,
    probeIntervalMs: null,
  };

  test('two hangs 90 s apart, each with a failed probe: the second trip waits the base cooldown again; without flapWindowMs it waited four times that', () => {
    const one = incident(initialState(parsePolicyConfig({ ...base, flapWindowMs: 60_000 })), T0);
    assert.deepEqual([one.trip, one.afterProbe], [30_000, 60_000], 'the failed probe still lengthens its own incident');
    assert.equal(one.state.consecutiveOpens, 1, 'the failed probe is not another open');
    const two = incident(one.state, one.state.closedAt! + 90_000);
    assert.equal(two.trip, 30_000);

    const before = incident(initialState(parsePolicyConfig({ ...base, flapWindowMs: null })), T0);
    assert.equal(before.state.consecutiveOpens, 2);
    assert.equal(incident(before.state, before.state.closedAt! + 90_000).trip, 120_000);
  });

  test('a server that flaps (trips again within the window of closing) waits longer each time, and starts over once it stays closed longer', () => {
    let s = initialState(parsePolicyConfig({ ...base, flapWindowMs: 60_000 }));
    const trips: number[] = [];
    for (const gap of [0, 20_000, 20_000, 61_000]) {
      const r = incident(s, (s.closedAt ?? T0) + gap);
      trips.push(r.trip);
      s = r.state;
    }
    assert.deepEqual(trips, [30_000, 60_000, 120_000, 30_000]);
  });
});
