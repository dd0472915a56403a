import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  histogramOf,
  initialState,
  maxCooldownMs,
  parsePolicyConfig,
  permit,
  rampAllowance,
  step,
  windowFigures,
  type PolicyConfig,
  type PolicyConfigInput,
  type PolicyEvent,
  type PolicyState,
  type ProbeToken,
  type StepResult,
  type TransitionRecord,
} from '../../src/breaker';

/** rand = 0.5 scales the cooldown by exactly 1: no jitter, so durations are exact. */
const MID = 0.5;
const T0 = 1_000_000;

const cfg = (input: PolicyConfigInput = {}): PolicyConfig => parsePolicyConfig(input);
const fresh = (input: PolicyConfigInput = {}): PolicyState => initialState(cfg(input));

const go = (state: PolicyState, event: PolicyEvent, now: number, rand = MID): StepResult =>
  step(state, event, now, rand);
const tick = (state: PolicyState, now: number): StepResult => go(state, { type: 'tick' }, now);
const report = (
  state: PolicyState,
  now: number,
  counts: Extract<PolicyEvent, { type: 'report' }>['counts'],
  extra: { latency?: number[]; retryAfterMs?: number } = {},
) => go(state, { type: 'report', counts, ...extra }, now);

function only(transitions: TransitionRecord[]): TransitionRecord {
  assert.equal(transitions.length, 1, `expected one transition, got ${JSON.stringify(transitions)}`);
  return transitions[0]!;
}

/** Trips a breaker with minSamples failures at `now`. */
function tripped(state: PolicyState, now: number): PolicyState {
  const r = report(state, now, { transient: state.config.minSamples });
  assert.equal(r.state.phase, 'open');
  return r.state;
}

/** A breaker that tripped at T0 and whose first cooldown has just elapsed. */
function halfOpen(input: PolicyConfigInput = {}): { state: PolicyState; now: number } {
  const opened = tripped(fresh(input), T0);
  const now = opened.cooldownUntil!;
  const r = tick(opened, now);
  assert.equal(r.state.phase, 'half-open');
  return { state: r.state, now };
}

function grant(
  state: PolicyState,
  now: number,
  requestId = 'req-1',
  requester = 'worker-1',
): { state: PolicyState; token: ProbeToken } {
  const r = go(state, { type: 'probe-request', requestId, requester }, now);
  if (r.decision?.kind !== 'granted') assert.fail(`expected a grant, got ${JSON.stringify(r.decision)}`);
  return { state: r.state, token: r.decision.token };
}

function probe(
  state: PolicyState,
  now: number,
  outcome: Extract<PolicyEvent, { type: 'probe-result' }>['outcome'],
  extra: { retryAfterMs?: number; latencyMs?: number } = {},
  id = `req-${now}`,
): StepResult {
  const g = grant(state, now, id);
  return go(g.state, { type: 'probe-result', generation: g.token.generation, outcome, ...extra }, now);
}

/** Runs successful probes until the breaker closes; returns the closed state. */
function closeByProbes(state: PolicyState, now: number): PolicyState {
  let s = state;
  for (let i = 0; i < s.config.probesToClose; i++) s = probe(s, now, 'success', {}, `close-${i}`).state;
  assert.equal(s.phase, 'closed');
  return s;
}

describe('closed -> open', () => {
  test('reaching failureRatio over minSamples samples opens the breaker', () => {
    const r = report(fresh(), T0, { success: 10, transient: 10 });
    const t = only(r.transitions);
    assert.equal(t.at, T0);
    assert.equal(t.from, 'closed');
    assert.equal(t.to, 'open');
    assert.equal(t.reason, 'failure-ratio');
    assert.equal(t.cooldownMs, 30_000);
    assert.match(t.detail, /10\/20 failed/);
    assert.equal(t.figures?.n, 20);
    assert.equal(t.figures?.failures, 10);
    assert.equal(t.figures?.failureRatio, 0.5);
    assert.equal(r.state.phase, 'open');
    assert.equal(r.state.openedAt, T0);
    assert.equal(r.state.cooldownUntil, T0 + 30_000);
    assert.equal(r.state.consecutiveOpens, 1);
  });

  test('a failure ratio just below failureRatio keeps the breaker closed', () => {
    const r = report(fresh(), T0, { success: 11, transient: 9 });
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.phase, 'closed');
  });

  test('service exceptions count as failures', () => {
    const t = only(report(fresh(), T0, { success: 10, 'service-exception': 10 }).transitions);
    assert.equal(t.reason, 'failure-ratio');
    assert.equal(t.figures?.serviceException, 10);
  });

  test('failures reported by several workers in one window add up to a trip', () => {
    const a = report(fresh(), T0, { success: 5, transient: 5 });
    assert.equal(a.state.phase, 'closed');
    const b = report(a.state, T0 + 5_000, { success: 5, transient: 5 });
    assert.equal(only(b.transitions).reason, 'failure-ratio');
  });

  test('fewer than minSamples samples never trip, even when all fail; the minSamples-th does', () => {
    const a = report(fresh(), T0, { transient: 19 });
    assert.deepEqual(a.transitions, []);
    assert.equal(a.state.phase, 'closed');
    const b = report(a.state, T0 + 1, { transient: 1 });
    assert.equal(only(b.transitions).figures?.samples, 20);
  });

  test('neutral and rate-limited outcomes count towards neither minSamples nor the ratio', () => {
    const r = report(fresh(), T0, { transient: 19, neutral: 500, 'rate-limited': 500 });
    assert.deepEqual(r.transitions, []);
    assert.equal(windowFigures(r.state, T0).samples, 19);
  });

  test('the failure ratio needs minSamples successes and failures, permanent faults do not make up the number', () => {
    const r = report(fresh(), T0, { transient: 10, permanent: 15 });
    assert.deepEqual(r.transitions, []);
  });

  test('failures that slid out of the window no longer count', () => {
    const a = report(fresh(), T0, { transient: 10 });
    const b = report(a.state, T0 + 40_000, { transient: 10 });
    assert.deepEqual(b.transitions, []);
    assert.equal(windowFigures(b.state, T0 + 40_000).failures, 10);
  });

  test('a p95 latency above 1.5x healthyP95Ms opens the breaker', () => {
    const r = report(
      fresh({ healthyP95Ms: 100 }),
      T0,
      { success: 20 },
      { latency: histogramOf(new Array<number>(20).fill(400)) },
    );
    const t = only(r.transitions);
    assert.equal(t.reason, 'latency');
    assert.equal(t.to, 'open');
    assert.ok(t.figures!.p95Ms! > 150);
    assert.equal(t.figures?.latencySamples, 20);
    assert.match(t.detail, /budget 150 ms/);
  });

  test('a p95 latency within budget keeps the breaker closed', () => {
    const r = report(
      fresh({ healthyP95Ms: 100 }),
      T0,
      { success: 20 },
      { latency: histogramOf(new Array<number>(20).fill(90)) },
    );
    assert.deepEqual(r.transitions, []);
  });

  test('the latency rule waits for latencyMinSamples latency samples', () => {
    const r = report(
      fresh({ healthyP95Ms: 100 }),
      T0,
      { success: 40 },
      { latency: histogramOf(new Array<number>(19).fill(5_000)) },
    );
    assert.deepEqual(r.transitions, []);
    const more = report(r.state, T0 + 1, {}, { latency: histogramOf([5_000]) });
    assert.equal(only(more.transitions).reason, 'latency');
  });

  test('an explicit latencyBudgetMs is the budget', () => {
    const slow = histogramOf(new Array<number>(20).fill(400));
    assert.deepEqual(
      report(fresh({ healthyP95Ms: 100, latencyBudgetMs: 1_000 }), T0, { success: 20 }, { latency: slow }).transitions,
      [],
    );
    assert.equal(
      only(report(fresh({ latencyBudgetMs: 300 }), T0, { success: 20 }, { latency: slow }).transitions).reason,
      'latency',
    );
  });

  test('slow-call rate: half or more of the completed calls slower than slowCallMs open the breaker', () => {
    // 10 of 20 calls took 12 s (all successes: nothing failed), the rest 300 ms.
    const latency = histogramOf([...new Array<number>(10).fill(12_000), ...new Array<number>(10).fill(300)]);
    const r = report(fresh({ slowCallMs: 10_000, quorum: 1 }), T0, { success: 20 }, { latency });
    const t = only(r.transitions);
    assert.deepEqual([t.reason, t.to, t.figures?.slowCalls, t.figures?.latencySamples], ['slow-calls', 'open', 10, 20]);
    assert.match(t.detail, /^10\/20 calls slower than 10000 ms \(50% >= 50%\)$/);
  });

  test('slow-call rate: below slowCallRatio, below latencyMinSamples, or off (slowCallMs null) it stays closed', () => {
    const slow = (n: number, fast: number) =>
      histogramOf([...new Array<number>(n).fill(12_000), ...new Array<number>(fast).fill(300)]);
    assert.deepEqual(
      report(fresh({ slowCallMs: 10_000 }), T0, { success: 20 }, { latency: slow(9, 11) }).transitions,
      [],
    );
    assert.deepEqual(
      report(
        fresh({ slowCallMs: 10_000, minSamples: 5, latencyMinSamples: 20 }),
        T0,
        { success: 19 },
        { latency: slow(19, 0) },
      ).transitions,
      [],
    );
    assert.deepEqual(
      report(fresh({ slowCallMs: 10_000, slowCallRatio: 0.9 }), T0, { success: 20 }, { latency: slow(17, 3) })
        .transitions,
      [],
    );
    assert.equal(
      only(
        report(fresh({ slowCallMs: 10_000, slowCallRatio: 0.8 }), T0, { success: 20 }, { latency: slow(17, 3) })
          .transitions,
      ).reason,
      'slow-calls',
    );
    const off = report(fresh({ slowCallMs: null }), T0, { success: 20 }, { latency: slow(20, 0) });
    assert.deepEqual(off.transitions, []);
    assert.equal(windowFigures(off.state, T0).slowCalls, undefined, 'no slow count while the rule is off');
  });

  test('a probe slower than slowCallMs fails: a slow-call trip does not close on slow answers', () => {
    const { state, now } = halfOpen({ slowCallMs: 2_000, probesToClose: 1 });
    const slow = probe(state, now, 'success', { latencyMs: 2_500 });
    assert.equal(slow.state.phase, 'open');
    assert.match(only(slow.transitions).detail, /succeeded in 2500 ms, slower than the slow-call threshold 2000 ms$/);
    const { state: s2, now: n2 } = halfOpen({ slowCallMs: 2_000, probesToClose: 1 });
    assert.equal(probe(s2, n2, 'success', { latencyMs: 1_500 }).state.phase, 'closed');
  });

  test('without healthyP95Ms or latencyBudgetMs no latency trips the breaker', () => {
    const r = report(
      fresh({ slowCallMs: null }),
      T0,
      { success: 100 },
      { latency: histogramOf(new Array<number>(100).fill(90_000)) },
    );
    assert.deepEqual(r.transitions, []);
  });

  test('a surge of permanent faults opens the breaker', () => {
    const t = only(report(fresh(), T0, { permanent: 50, success: 10 }).transitions);
    assert.equal(t.reason, 'permanent-surge');
    assert.equal(t.figures?.permanent, 50);
    assert.equal(t.figures?.samples, 60);
  });

  test('permanent faults below permanentSurgeRatio of the samples do not trip', () => {
    assert.deepEqual(report(fresh(), T0, { permanent: 50, success: 60 }).transitions, []);
  });

  test('permanent faults below permanentSurgeCount do not trip', () => {
    assert.deepEqual(report(fresh(), T0, { permanent: 49 }).transitions, []);
  });

  test('a permanent surge below minSamples does not trip', () => {
    assert.deepEqual(report(fresh({ permanentSurgeCount: 5 }), T0, { permanent: 19 }).transitions, []);
    assert.equal(
      only(report(fresh({ permanentSurgeCount: 5 }), T0, { permanent: 20 }).transitions).reason,
      'permanent-surge',
    );
  });

  test('reports while open are recorded but change no state', () => {
    const opened = tripped(fresh(), T0);
    const r = report(opened, T0 + 1_000, { transient: 100 });
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.phase, 'open');
    assert.equal(r.state.cooldownUntil, opened.cooldownUntil);
  });
});

describe('the fast window', () => {
  test('an outage after a long healthy stretch trips on the newest samples alone', () => {
    let s = report(fresh(), T0, { success: 400 }).state;
    const r = report(s, T0 + 20_000, { transient: 45 });
    const t = only(r.transitions);
    assert.equal(t.reason, 'failure-ratio');
    assert.match(t.detail, /45\/45 failed .* in the newest 45 samples/);
    assert.equal(t.figures!.n, 45, "the figures are the fast window's");
    assert.equal(windowFigures(r.state, T0 + 20_000).n, 445, 'while the whole window holds 445');
    s = fresh({ fastWindowMs: 0 });
    s = report(s, T0, { success: 400 }).state;
    assert.deepEqual(
      report(s, T0 + 20_000, { transient: 45 }).transitions,
      [],
      'with the fast window off, 45 of 445 is no trip',
    );
  });

  test('the fast window needs fastMinSamples: fewer failures wait for the whole window', () => {
    const s = report(fresh(), T0, { success: 400 }).state;
    assert.deepEqual(report(s, T0 + 20_000, { transient: 39 }).transitions, []);
  });

  test('the fast window is the shortest newest run of buckets holding fastMinSamples', () => {
    // 250 ms buckets: 30 successes 300 ms ago, then 40 failures now. The newest bucket alone holds 40: trip.
    let s = report(fresh(), T0, { success: 30 }).state;
    const r = report(s, T0 + 300, { transient: 40 });
    assert.equal(only(r.transitions).figures!.n, 40);
    // 30 failures now after 30 successes: the newest bucket holds 30 < 40, so the run takes in the older
    // bucket too: 30 / 60 failed, which still reaches 0.5.
    s = report(fresh(), T0, { success: 30 }).state;
    const r2 = report(s, T0 + 300, { transient: 30 });
    assert.equal(only(r2.transitions).figures!.n, 60);
  });
});

describe('the fast window on a renderer that takes seconds', () => {
  // A fleet rendering in 1-3 s: 40 successes a second for 20 s, then a hang. The hung calls started over one
  // render time, so their stalls reach the entity over about 3 s, 15 a second: never 40 within one second.
  function slowFleet(input: PolicyConfigInput): { state: PolicyState; now: number } {
    let s = fresh(input);
    for (let i = 0; i < 20; i++)
      s = report(
        s,
        T0 + i * 1_000,
        { success: 40 },
        { latency: histogramOf(Array.from({ length: 40 }, (_, j) => 1_000 + 50 * j)) },
      ).state;
    return { state: s, now: T0 + 20_000 };
  }
  const stalls = (state: PolicyState, from: number): StepResult[] => {
    const out: StepResult[] = [];
    for (let i = 0; i < 12; i++) {
      const r = report(i ? out[i - 1]!.state : state, from + i * 250, { transient: 4 });
      out.push(r);
      if (r.transitions.length) break;
    }
    return out;
  };

  test('with fastWindowFollowsLatency it reaches back a p95 latency, so stalls spread over a render time trip it', () => {
    const { state, now } = slowFleet({ fastWindowFollowsLatency: true });
    const steps = stalls(state, now + 4_000);
    const t = only(steps[steps.length - 1]!.transitions);
    assert.equal(t.reason, 'failure-ratio');
    assert.equal(t.figures!.n, 40, 'the fast window: the 40 stalls alone, no success of the healthy stretch');
    assert.equal(steps.length, 10, 'tripped on the tenth report of four, 2.25 s after the first');
  });

  test('without it (false) the same stalls never fill a one-second fast window', () => {
    const { state, now } = slowFleet({ fastWindowFollowsLatency: false });
    const steps = stalls(state, now + 4_000);
    assert.ok(steps.every((r) => r.transitions.length === 0));
  });

  test('with fastWindowFollowsFloor one worker early in a night (13 answers, 8 calls in flight) has its stalls judged together too', () => {
    // 13 answers of 2.5-3.5 s, then the 8 calls in flight stall over 1.5 s: the window holds 13 latency samples,
    // under latencyMinSamples (20) but at the floor the fleet's 8 calls in flight bring minSamples down to.
    const worker = (input: PolicyConfigInput) => {
      let s = fresh({ fastWindowFollowsLatency: true, smallFleetFloor: 3, ...input });
      for (let i = 0; i < 13; i++)
        s = go(
          s,
          { type: 'report', counts: { success: 1 }, latency: histogramOf([2_500 + 80 * i]), concurrency: 8 },
          T0 + i * 600,
        ).state;
      const out: StepResult[] = [];
      [3, 2, 2, 1].forEach((transient, i) =>
        out.push(
          go(
            i ? out[i - 1]!.state : s,
            { type: 'report', counts: { transient }, concurrency: 8 },
            T0 + 13_000 + i * 500,
          ),
        ),
      );
      return out;
    };
    const steps = worker({ fastWindowFollowsFloor: true });
    const t = only(steps[3]!.transitions);
    assert.match(t.detail, /8\/8 failed .* in the newest 8 samples/);
    assert.ok(steps.slice(0, 3).every((r) => r.transitions.length === 0));
    assert.ok(
      worker({ fastWindowFollowsFloor: false }).every((r) => r.transitions.length === 0),
      'without it the fast window is one second until 20 latency samples: 5 stalls in it, and 8 of 21 in the whole window',
    );
  });

  test('a fast endpoint keeps its one-second fast window', () => {
    let s = fresh({ fastWindowFollowsLatency: true });
    for (let i = 0; i < 20; i++)
      s = report(
        s,
        T0 + i * 1_000,
        { success: 40 },
        { latency: histogramOf(Array.from({ length: 40 }, () => 30)) },
      ).state;
    const steps = stalls(s, T0 + 24_000);
    assert.ok(
      steps.every((r) => r.transitions.length === 0),
      'stalls at 16 a second never hold 40 within 1 s',
    );
  });
});

describe('probe cancel', () => {
  test('a requester that gives up releases its token without counting anything', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now, 'gave-up');
    const r = go(g.state, { type: 'probe-cancel', requestId: 'gave-up' }, now + 10);
    assert.deepEqual(r.state.probes, []);
    assert.equal(r.state.probeSuccesses, 0);
    assert.deepEqual(r.transitions, []);
    assert.equal(grant(r.state, now + 11, 'next').token.generation, g.token.generation + 1);
    assert.match(
      go(r.state, { type: 'probe-cancel', requestId: 'gave-up' }, now + 12).ignored ?? '',
      /holds no live token/,
    );
  });
});

describe('open -> half-open', () => {
  test('the breaker stays open until the cooldown elapses, then goes half-open', () => {
    const opened = tripped(fresh(), T0);
    const before = tick(opened, T0 + 29_999);
    assert.deepEqual(before.transitions, []);
    assert.equal(before.state.phase, 'open');
    const after = tick(before.state, T0 + 30_000);
    const t = only(after.transitions);
    assert.deepEqual([t.at, t.from, t.to, t.reason], [T0 + 30_000, 'open', 'half-open', 'cooldown-elapsed']);
    assert.match(t.detail, /30000 ms/);
    assert.equal(t.cooldownMs, undefined);
    assert.equal(after.state.phase, 'half-open');
    assert.equal(after.state.cooldownUntil, null);
  });

  test('any event after the cooldown moves the breaker to half-open first', () => {
    const opened = tripped(fresh(), T0);
    const r = go(opened, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0 + 30_000);
    assert.equal(only(r.transitions).reason, 'cooldown-elapsed');
    assert.equal(r.decision?.kind, 'granted');
  });

  test('a probe request while open is denied with the remaining cooldown', () => {
    const opened = tripped(fresh(), T0);
    const r = go(opened, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0 + 10_000);
    assert.deepEqual(r.decision, { kind: 'denied', reason: 'open', retryAfterMs: 20_000 });
    assert.deepEqual(r.state.probes, []);
  });
});

describe('half-open probes', () => {
  test('with the latency rule on, a probe slower than the budget fails: a latency trip does not close on slow 200s and flap', () => {
    const { state, now } = halfOpen({ latencyBudgetMs: 500, probesToClose: 1 });
    const slow = probe(state, now, 'success', { latencyMs: 900 });
    const t = only(slow.transitions);
    assert.equal(slow.state.phase, 'open');
    assert.equal(t.reason, 'probe-failed');
    assert.match(t.detail, /succeeded in 900 ms, slower than the latency budget 500 ms$/);
    // A probe within the budget closes it.
    const after = tick(slow.state, slow.state.cooldownUntil!);
    const fast = probe(after.state, slow.state.cooldownUntil!, 'success', { latencyMs: 120 });
    assert.equal(fast.state.phase, 'closed');
    // Without a latency rule (nor a slow-call rule) a slow success is a success.
    const noRule = halfOpen({ probesToClose: 1, slowCallMs: null });
    assert.equal(probe(noRule.state, noRule.now, 'success', { latencyMs: 90_000 }).state.phase, 'closed');
  });

  test('a probe request in half-open is granted a token with a generation and a lease', () => {
    const { state, now } = halfOpen();
    const r = go(state, { type: 'probe-request', requestId: 'req-1', requester: 'worker-7' }, now + 5);
    assert.deepEqual(r.decision, {
      kind: 'granted',
      token: {
        generation: 1,
        requestId: 'req-1',
        holder: 'worker-7',
        grantedAt: now + 5,
        leaseUntil: now + 5 + 30_000,
      },
    });
    assert.deepEqual(r.transitions, []);
  });

  test('a granted token is recorded in the returned state', () => {
    const { state, now } = halfOpen();
    const { state: s, token } = grant(state, now);
    assert.deepEqual(s.probes, [token]);
    assert.equal(s.lastGeneration, token.generation);
  });

  test('a second requester is denied as busy until the lease ends', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now, 'req-1');
    const r = go(g.state, { type: 'probe-request', requestId: 'req-2', requester: 'worker-2' }, now + 1_000);
    assert.deepEqual(r.decision, { kind: 'denied', reason: 'busy', retryAfterMs: 29_000 });
    assert.deepEqual(r.state.probes, [g.token]);
  });

  test('maxConcurrentProbes tokens may be out at once, then requests are busy', () => {
    const { state, now } = halfOpen({ maxConcurrentProbes: 2 });
    const a = grant(state, now, 'a');
    const b = grant(a.state, now + 10, 'b');
    assert.equal(b.token.generation, 2);
    assert.equal(b.state.probes.length, 2);
    const c = go(b.state, { type: 'probe-request', requestId: 'c', requester: 'w' }, now + 20);
    assert.deepEqual(c.decision, { kind: 'denied', reason: 'busy', retryAfterMs: 30_000 - 20 });
  });

  test('a repeated request gets the token it already holds, without a new generation', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now, 'req-1');
    const again = go(g.state, { type: 'probe-request', requestId: 'req-1', requester: 'worker-1' }, now + 500);
    assert.deepEqual(again.decision, { kind: 'granted', token: g.token });
    // Nothing changes but the window sliding on.
    assert.deepEqual({ ...again.state, window: [] }, { ...g.state, window: [] });
  });

  test('an expired lease frees the slot for a new token of the next generation', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now, 'req-1');
    const stillBusy = go(
      g.state,
      { type: 'probe-request', requestId: 'req-2', requester: 'w2' },
      g.token.leaseUntil - 1,
    );
    assert.equal(stillBusy.decision?.kind, 'denied');
    const next = grant(stillBusy.state, g.token.leaseUntil, 'req-2', 'w2');
    assert.equal(next.token.generation, 2);
    assert.deepEqual(next.state.probes, [next.token]);
  });

  test('a lease expiring on a tick removes the token', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now);
    assert.equal(tick(g.state, g.token.leaseUntil - 1).state.probes.length, 1);
    assert.deepEqual(tick(g.state, g.token.leaseUntil).state.probes, []);
  });

  test('the result of an expired token is ignored', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now);
    const r = go(
      g.state,
      { type: 'probe-result', generation: g.token.generation, outcome: 'transient' },
      g.token.leaseUntil,
    );
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.phase, 'half-open');
    assert.match(r.ignored ?? '', /generation 1 ignored/);
  });

  test('the result of a superseded generation is ignored', () => {
    const { state, now } = halfOpen();
    const first = grant(state, now, 'a');
    const second = grant(first.state, first.token.leaseUntil, 'b');
    const r = go(
      second.state,
      { type: 'probe-result', generation: first.token.generation, outcome: 'success' },
      first.token.leaseUntil + 1,
    );
    assert.ok(r.ignored);
    assert.equal(r.state.probeSuccesses, 0);
    assert.deepEqual(r.state.probes, [second.token]);
  });

  test('a failed probe re-opens with a doubled cooldown', () => {
    // Every open counting (no flapWindowMs), and no probeIntervalMs to shorten the wait.
    const { state, now } = halfOpen({ flapWindowMs: null, probeIntervalMs: null });
    const r = probe(state, now + 100, 'transient');
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason], ['half-open', 'open', 'probe-failed']);
    assert.equal(t.cooldownMs, 60_000);
    assert.ok(t.figures, 'probe-failed records the window figures');
    assert.equal(r.state.consecutiveOpens, 2);
    assert.equal(r.state.cooldownUntil, now + 100 + 60_000);
    assert.deepEqual(r.state.probes, []);
  });

  test('a service-exception probe result also re-opens', () => {
    const { state, now } = halfOpen();
    assert.equal(only(probe(state, now, 'service-exception').transitions).reason, 'probe-failed');
  });

  test('consecutive failed probes grow the cooldown by the multiplier up to the cap', () => {
    let { state, now } = halfOpen({ probeIntervalMs: null });
    const cooldowns = [30_000];
    for (let i = 0; i < 5; i++) {
      const r = probe(state, now, 'transient');
      cooldowns.push(only(r.transitions).cooldownMs!);
      now = r.state.cooldownUntil!;
      state = tick(r.state, now).state;
    }
    assert.deepEqual(cooldowns, [30_000, 60_000, 120_000, 240_000, 240_000, 240_000]);
  });

  test('the cap is cooldownMs x cooldownMaxFactor with any multiplier', () => {
    let { state, now } = halfOpen({
      cooldownMs: 1_000,
      cooldownMultiplier: 3,
      cooldownMaxFactor: 5,
      probeIntervalMs: null,
    });
    const cooldowns: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = probe(state, now, 'transient');
      cooldowns.push(only(r.transitions).cooldownMs!);
      now = r.state.cooldownUntil!;
      state = tick(r.state, now).state;
    }
    assert.deepEqual(cooldowns, [3_000, 5_000, 5_000]);
  });

  test('jitter scales the cooldown by 1 +/- cooldownJitter with rand', () => {
    const low = step(fresh(), { type: 'report', counts: { transient: 20 } }, T0, 0);
    const high = step(fresh(), { type: 'report', counts: { transient: 20 } }, T0, 0.999_999);
    assert.equal(only(low.transitions).cooldownMs, 24_000);
    assert.equal(only(high.transitions).cooldownMs, 36_000);
  });

  test('probesToClose consecutive successful probes close the breaker and start the ramp', () => {
    const { state, now } = halfOpen();
    const one = probe(state, now + 10, 'success', {}, 'a');
    assert.deepEqual(one.transitions, []);
    assert.equal(one.state.probeSuccesses, 1);
    const two = probe(one.state, now + 20, 'success', {}, 'b');
    assert.deepEqual(two.transitions, []);
    assert.equal(two.state.phase, 'half-open');
    const three = probe(two.state, now + 30, 'success', {}, 'c');
    const t = only(three.transitions);
    assert.deepEqual([t.at, t.from, t.to, t.reason], [now + 30, 'half-open', 'closed', 'probes-succeeded']);
    assert.match(t.detail, /3 consecutive successful probes/);
    assert.equal(three.state.phase, 'closed');
    assert.equal(three.state.rampStartedAt, now + 30);
    assert.equal(three.state.closedAt, now + 30);
    assert.deepEqual(three.state.window, [], 'the failures that tripped it are forgotten');
    assert.equal(three.state.probeSuccesses, 0);
  });

  test('after closing, the allowance grows linearly from rampFloor to 1 over rampMs', () => {
    const { state, now } = halfOpen();
    const closed = closeByProbes(state, now);
    assert.equal(rampAllowance(closed, now), 0.1);
    assert.ok(Math.abs(rampAllowance(closed, now + 5_000) - 0.55) < 1e-12);
    assert.equal(rampAllowance(closed, now + 10_000), 1);
    assert.equal(rampAllowance(closed, now + 60_000), 1);
    assert.equal(permit(closed, now + 2_500).allowance, 0.1 + 0.9 * 0.25);
    let last = 0;
    for (let t = now; t <= now + 10_000; t += 500) {
      const a = rampAllowance(closed, t);
      assert.ok(a >= last && a <= 1);
      last = a;
    }
  });

  test('with rampMs 0 a recovered breaker allows full traffic at once', () => {
    const { state, now } = halfOpen({ rampMs: 0 });
    const closed = closeByProbes(state, now);
    assert.equal(closed.rampStartedAt, null);
    assert.equal(permit(closed, now).allowance, 1);
  });

  test('a failed probe between successes restarts the count', () => {
    const { state, now } = halfOpen();
    let s = probe(state, now, 'success', {}, 'a').state;
    s = probe(s, now, 'success', {}, 'b').state;
    const failed = probe(s, now, 'transient', {}, 'c');
    assert.equal(failed.state.phase, 'open');
    const later = failed.state.cooldownUntil!;
    const again = tick(failed.state, later).state;
    assert.equal(again.probeSuccesses, 0);
    let s2 = probe(again, later, 'success', {}, 'd').state;
    s2 = probe(s2, later, 'success', {}, 'e').state;
    assert.equal(s2.phase, 'half-open', 'two successes after the failure are not enough');
    assert.equal(probe(s2, later, 'success', {}, 'f').state.phase, 'closed');
  });

  for (const outcome of ['neutral', 'permanent', 'rate-limited'] as const) {
    test(`a ${outcome} probe result releases the token without counting`, () => {
      const { state, now } = halfOpen();
      const one = probe(state, now, 'success', {}, 'a');
      const r = probe(one.state, now + 1, outcome, {}, 'b');
      assert.deepEqual(r.transitions, []);
      assert.equal(r.ignored, undefined);
      assert.deepEqual(r.state.probes, []);
      assert.equal(r.state.probeSuccesses, 1);
      assert.equal(r.state.phase, 'half-open');
      const next = grant(r.state, now + 2, 'c');
      assert.equal(next.token.generation, 3, 'the slot is free at once');
    });
  }

  test('a probe result in the same step as the grant is impossible to confuse across generations', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now);
    const r = go(g.state, { type: 'probe-result', generation: g.token.generation + 1, outcome: 'transient' }, now);
    assert.ok(r.ignored);
    assert.equal(r.state.phase, 'half-open');
    assert.deepEqual(r.state.probes, [g.token]);
  });
});

describe('cooldown decay', () => {
  /** Opens three times in a row, then closes at `closedAt` (without flapWindowMs, where the decay applies). */
  function closedAfterThreeOpens(): { state: PolicyState; closedAt: number } {
    let { state, now } = halfOpen({ flapWindowMs: null, probeIntervalMs: null });
    for (let i = 0; i < 2; i++) {
      const r = probe(state, now, 'transient', {}, `f${i}`);
      now = r.state.cooldownUntil!;
      state = tick(r.state, now).state;
    }
    assert.equal(state.consecutiveOpens, 3);
    return { state: closeByProbes(state, now), closedAt: now };
  }

  test('a trip soon after closing continues the growth', () => {
    const { state, closedAt } = closedAfterThreeOpens();
    const t = only(report(state, closedAt + 1_000, { transient: 20 }).transitions);
    assert.equal(t.cooldownMs, 240_000);
  });

  test('each full cooldownDecayMs spent closed forgives one consecutive open', () => {
    const { state, closedAt } = closedAfterThreeOpens();
    const at = (dt: number) => report(state, closedAt + dt, { transient: 20 });
    assert.equal(only(at(299_999).transitions).cooldownMs, 240_000);
    assert.equal(only(at(300_000).transitions).cooldownMs, 120_000);
    assert.equal(at(300_000).state.consecutiveOpens, 3);
    assert.equal(only(at(600_000).transitions).cooldownMs, 60_000);
    assert.equal(only(at(900_000).transitions).cooldownMs, 30_000);
    assert.equal(only(at(5_000_000).transitions).cooldownMs, 30_000);
    assert.equal(at(5_000_000).state.consecutiveOpens, 1);
  });
});

describe('Retry-After', () => {
  test('a failed probe with a longer Retry-After lengthens the cooldown to it', () => {
    const { state, now } = halfOpen();
    const t = only(probe(state, now, 'transient', { retryAfterMs: 100_000 }).transitions);
    assert.equal(t.cooldownMs, 100_000);
  });

  test('a shorter Retry-After does not shorten the cooldown', () => {
    const { state, now } = halfOpen({ probeIntervalMs: null });
    assert.equal(only(probe(state, now, 'transient', { retryAfterMs: 1_000 }).transitions).cooldownMs, 60_000);
  });

  test('a Retry-After never holds the breaker beyond the jittered cap', () => {
    const { state, now } = halfOpen();
    const r = probe(state, now, 'transient', { retryAfterMs: 86_400_000 });
    assert.equal(only(r.transitions).cooldownMs, maxCooldownMs(state.config));
    assert.equal(only(r.transitions).cooldownMs, 288_000);
    assert.equal(r.state.retryAfterHintUntil, null, 'the hint is used up by the open');
  });

  test("a Retry-After reported with failures lengthens the next trip's cooldown", () => {
    const a = report(fresh(), T0, { transient: 5 }, { retryAfterMs: 90_000 });
    assert.equal(a.state.retryAfterHintUntil, T0 + 90_000);
    const b = report(a.state, T0 + 10_000, { transient: 15 });
    assert.equal(only(b.transitions).cooldownMs, 80_000);
  });

  test('a Retry-After in a report is capped at the jittered cap too', () => {
    const r = report(fresh(), T0, { transient: 20 }, { retryAfterMs: 10_000_000 });
    assert.equal(only(r.transitions).cooldownMs, 288_000);
  });

  test('a Retry-After reported without failures is not a hint', () => {
    const r = report(fresh(), T0, { success: 5, 'rate-limited': 3 }, { retryAfterMs: 90_000 });
    assert.equal(r.state.retryAfterHintUntil, null);
  });

  test('a Retry-After that has passed no longer lengthens the cooldown', () => {
    const a = report(fresh(), T0, { transient: 5 }, { retryAfterMs: 40_000 });
    const b = report(a.state, T0 + 50_000, { transient: 20 });
    assert.equal(only(b.transitions).cooldownMs, 30_000);
  });
});

describe('force-open', () => {
  test('force-open without a duration blocks until told otherwise', () => {
    const r = go(fresh(), { type: 'force-open', reason: 'maintenance' }, T0);
    const t = only(r.transitions);
    assert.deepEqual(
      [t.at, t.from, t.to, t.reason, t.detail],
      [T0, 'closed', 'forced-open', 'forced-open', 'maintenance'],
    );
    assert.equal(r.state.forcedUntil, null);
    const later = tick(r.state, T0 + 365 * 86_400_000);
    assert.deepEqual(later.transitions, []);
    assert.deepEqual(permit(later.state, T0 + 365 * 86_400_000), {
      state: 'forced-open',
      allow: false,
      retryAfterMs: null,
      allowance: 0,
      probeRequired: false,
    });
    const req = go(later.state, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0 + 1);
    assert.deepEqual(req.decision, { kind: 'denied', reason: 'forced-open', retryAfterMs: null });
  });

  test('reports never trip or close a forced-open breaker', () => {
    const forced = go(fresh(), { type: 'force-open' }, T0).state;
    const r = report(forced, T0 + 1, { transient: 100 });
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.mode, 'forced-open');
  });

  test('force-open with a duration expires into half-open', () => {
    const r = go(fresh(), { type: 'force-open', durationMs: 60_000 }, T0);
    assert.equal(r.state.forcedUntil, T0 + 60_000);
    assert.match(only(r.transitions).detail, /60000 ms/);
    assert.equal(permit(r.state, T0 + 15_000).retryAfterMs, 45_000);
    const req = go(r.state, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0 + 15_000);
    assert.deepEqual(req.decision, { kind: 'denied', reason: 'forced-open', retryAfterMs: 45_000 });
    assert.deepEqual(tick(r.state, T0 + 59_999).transitions, []);
    const expired = tick(r.state, T0 + 60_000);
    const t = only(expired.transitions);
    assert.deepEqual([t.at, t.from, t.to, t.reason], [T0 + 60_000, 'forced-open', 'half-open', 'force-expired']);
    assert.equal(expired.state.mode, 'auto');
    assert.equal(expired.state.forcedUntil, null);
    assert.equal(expired.state.phase, 'half-open');
  });

  test('force-open revokes outstanding probe tokens', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now);
    const forced = go(g.state, { type: 'force-open' }, now + 1);
    assert.deepEqual(forced.state.probes, []);
    assert.equal(only(forced.transitions).from, 'half-open');
    const result = go(
      forced.state,
      { type: 'probe-result', generation: g.token.generation, outcome: 'success' },
      now + 2,
    );
    assert.ok(result.ignored);
  });

  test('enable from forced-open goes half-open to test recovery', () => {
    const forced = go(tripped(fresh(), T0), { type: 'force-open' }, T0 + 1).state;
    const r = go(forced, { type: 'enable' }, T0 + 2);
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason], ['forced-open', 'half-open', 'enabled']);
    assert.equal(r.state.mode, 'auto');
    assert.equal(r.state.phase, 'half-open');
    assert.equal(grant(r.state, T0 + 3).token.generation, 1);
  });

  test('a force-open duration that is not a positive number is rejected and changes nothing', () => {
    for (const durationMs of [0, -5, Number.NaN]) {
      const r = go(fresh(), { type: 'force-open', durationMs }, T0);
      assert.deepEqual(r.transitions, []);
      assert.equal(r.state.mode, 'auto');
      assert.match(r.ignored ?? '', new RegExp(`durationMs must be a positive number of ms \\(got ${durationMs}\\)`));
    }
  });

  test('time spent forced open does not forgive consecutive opens', () => {
    // Without flapWindowMs, where cooldownDecayMs forgives opens for time spent closed.
    let { state, now } = halfOpen({ flapWindowMs: null, probeIntervalMs: null });
    state = closeByProbes(state, now);
    // Forced open for a long maintenance, then a failed probe: that open still counts as the second in a row.
    state = go(state, { type: 'force-open' }, now + 1).state;
    state = go(state, { type: 'enable' }, now + 10_000_000).state;
    assert.equal(state.phase, 'half-open');
    const t = only(probe(state, now + 10_000_001, 'transient').transitions);
    assert.equal(t.cooldownMs, 60_000);
  });
});

describe('force-close', () => {
  test('force-close lets traffic through and forgets the window', () => {
    const opened = tripped(fresh(), T0);
    const r = go(opened, { type: 'force-close', reason: 'operator override' }, T0 + 1);
    const t = only(r.transitions);
    assert.deepEqual(
      [t.from, t.to, t.reason, t.detail],
      ['open', 'forced-closed', 'forced-close', 'operator override'],
    );
    assert.equal(r.state.mode, 'forced-closed');
    assert.deepEqual(r.state.window, []);
    assert.deepEqual(permit(r.state, T0 + 1), {
      state: 'forced-closed',
      allow: true,
      retryAfterMs: null,
      allowance: 1,
      probeRequired: false,
    });
  });

  test('a forced-closed breaker never trips and needs no probes', () => {
    const closed = go(fresh(), { type: 'force-close' }, T0).state;
    const r = report(closed, T0 + 1, { transient: 1_000 });
    assert.deepEqual(r.transitions, []);
    assert.equal(r.state.mode, 'forced-closed');
    const req = go(r.state, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0 + 2);
    assert.deepEqual(req.decision, { kind: 'not-needed', state: 'forced-closed' });
  });

  test('enable from forced-closed returns to closed without a ramp', () => {
    const closed = go(tripped(fresh(), T0), { type: 'force-close' }, T0 + 1).state;
    const r = go(closed, { type: 'enable' }, T0 + 2);
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason], ['forced-closed', 'closed', 'enabled']);
    assert.equal(permit(r.state, T0 + 2).allowance, 1);
  });
});

describe('reset', () => {
  test('reset returns to the initial state, keeping the configuration and the probe generation, and is recorded even from closed', () => {
    // Every open counting (no flapWindowMs): the failed probe is a second one for the reset to forget, and its
    // grown cooldown (no probeIntervalMs) still runs when the reset comes.
    const config = cfg({ minSamples: 5, flapWindowMs: null, probeIntervalMs: null });
    let s = initialState(config);
    s = report(s, T0, { transient: 5 }).state;
    s = probe(tick(s, s.cooldownUntil!).state, s.cooldownUntil!, 'transient').state;
    assert.equal(s.consecutiveOpens, 2);
    const r = go(s, { type: 'reset', reason: 'new deployment' }, T0 + 40_000);
    assert.deepEqual(r.state, { ...initialState(config), lastGeneration: 1 });
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason, t.detail], ['open', 'closed', 'reset', 'new deployment']);
    const again = go(r.state, { type: 'reset' }, T0 + 40_001);
    assert.deepEqual([only(again.transitions).from, only(again.transitions).to], ['closed', 'closed']);
  });

  test('a token granted before a reset stays stale after it, even once new tokens are granted', () => {
    let { state, now } = halfOpen();
    const old = grant(state, now, 'before-reset', 'worker-a');
    state = go(old.state, { type: 'reset' }, now + 1).state;
    state = tripped(state, now + 2);
    const halfOpenAt = state.cooldownUntil!;
    state = tick(state, halfOpenAt).state;
    assert.equal(state.phase, 'half-open');
    const fresh = grant(state, halfOpenAt, 'after-reset', 'worker-b');
    assert.notEqual(fresh.token.generation, old.token.generation);
    const late = go(
      fresh.state,
      { type: 'probe-result', generation: old.token.generation, outcome: 'transient' },
      halfOpenAt + 1,
    );
    assert.match(late.ignored ?? '', /ignored/);
    assert.equal(late.state.phase, 'half-open');
  });

  test('after a reset the next trip starts from the first cooldown', () => {
    let { state, now } = halfOpen();
    state = probe(state, now, 'transient').state;
    const r = go(state, { type: 'reset' }, now + 1);
    assert.equal(only(report(r.state, now + 2, { transient: 20 }).transitions).cooldownMs, 30_000);
  });
});

describe('disable (metrics only)', () => {
  test('disabling a half-open breaker starts its shadow probe count from zero', () => {
    let { state, now } = halfOpen();
    state = probe(state, now, 'success', {}, 'p1').state;
    assert.equal(state.probeSuccesses, 1);
    const disabled = go(state, { type: 'disable' }, now + 1).state;
    assert.equal(disabled.probeSuccesses, 0);
  });

  test('disable is recorded and the breaker never blocks', () => {
    const r = go(fresh(), { type: 'disable' }, T0);
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason, t.shadow], ['closed', 'metrics-only', 'disabled', undefined]);
    assert.deepEqual(permit(r.state, T0), {
      state: 'metrics-only',
      allow: true,
      retryAfterMs: null,
      allowance: 1,
      probeRequired: false,
    });
    assert.deepEqual(go(r.state, { type: 'probe-request', requestId: 'a', requester: 'w' }, T0).decision, {
      kind: 'not-needed',
      state: 'metrics-only',
    });
  });

  test('a metrics-only breaker trips in the shadow, recorded with shadow: true, but still allows traffic', () => {
    const disabled = go(fresh(), { type: 'disable' }, T0).state;
    const r = report(disabled, T0 + 1, { transient: 20 });
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to, t.reason, t.shadow], ['closed', 'open', 'failure-ratio', true]);
    assert.equal(t.cooldownMs, 30_000);
    assert.equal(r.state.mode, 'metrics-only');
    assert.equal(r.state.phase, 'open');
    assert.equal(permit(r.state, T0 + 2).allow, true);
    assert.equal(permit(r.state, T0 + 2).state, 'metrics-only');
  });

  test('the shadow phase cools down, fails and recovers on reports standing in for probes', () => {
    const disabled = go(fresh({ probeIntervalMs: null }), { type: 'disable' }, T0).state;
    const opened = report(disabled, T0, { transient: 20 }).state;
    const half = tick(opened, T0 + 30_000);
    assert.deepEqual(
      half.transitions.map((t) => [t.from, t.to, t.reason, t.shadow]),
      [['open', 'half-open', 'cooldown-elapsed', true]],
    );
    const reopened = report(half.state, T0 + 30_001, { success: 3, transient: 1 });
    assert.deepEqual(
      reopened.transitions.map((t) => [t.from, t.to, t.reason, t.shadow, t.cooldownMs]),
      [['half-open', 'open', 'probe-failed', true, 60_000]],
    );
    let s = tick(reopened.state, T0 + 90_001).state;
    s = report(s, T0 + 90_002, { success: 1 }).state;
    s = report(s, T0 + 90_003, { success: 1 }).state;
    assert.equal(s.phase, 'half-open');
    const closed = report(s, T0 + 90_004, { success: 1 });
    assert.deepEqual(
      closed.transitions.map((t) => [t.from, t.to, t.reason, t.shadow]),
      [['half-open', 'closed', 'probes-succeeded', true]],
    );
    assert.equal(permit(closed.state, T0 + 90_004).allowance, 1, 'no ramp is imposed in metrics-only mode');
  });

  test('disabling an open breaker unblocks traffic at once', () => {
    const opened = tripped(fresh(), T0);
    const r = go(opened, { type: 'disable' }, T0 + 1);
    assert.deepEqual([only(r.transitions).from, only(r.transitions).to], ['open', 'metrics-only']);
    assert.equal(permit(r.state, T0 + 1).allow, true);
  });

  test('enable from metrics-only goes to closed with a fresh window', () => {
    const disabled = go(fresh(), { type: 'disable' }, T0).state;
    const opened = report(disabled, T0, { transient: 20 }).state;
    const r = go(opened, { type: 'enable', reason: 'back to normal' }, T0 + 1);
    const t = only(r.transitions);
    assert.deepEqual(
      [t.from, t.to, t.reason, t.detail, t.shadow],
      ['metrics-only', 'closed', 'enabled', 'back to normal', undefined],
    );
    assert.equal(r.state.mode, 'auto');
    assert.equal(r.state.phase, 'closed');
    assert.deepEqual(r.state.window, []);
  });

  test('enable in automatic mode changes nothing', () => {
    const s = tripped(fresh(), T0);
    const r = go(s, { type: 'enable' }, T0 + 1);
    assert.deepEqual(r.transitions, []);
    assert.deepEqual(r.state, s);
  });
});

describe('configure', () => {
  test('a valid patch changes the named fields, keeps the rest, and is recorded', () => {
    const s = fresh({ cooldownMs: 10_000 });
    const r = go(s, { type: 'configure', config: { failureRatio: 0.25, minSamples: 4 } }, T0);
    const t = only(r.transitions);
    assert.deepEqual([t.at, t.from, t.to, t.reason], [T0, 'closed', 'closed', 'configured']);
    assert.match(t.detail, /failureRatio, minSamples/);
    assert.equal(r.state.config.failureRatio, 0.25);
    assert.equal(r.state.config.minSamples, 4);
    assert.equal(r.state.config.cooldownMs, 10_000);
    assert.equal(r.ignored, undefined);
  });

  test('a new configuration applies to the following events', () => {
    const s = go(fresh(), { type: 'configure', config: { minSamples: 4 } }, T0).state;
    assert.equal(only(report(s, T0 + 1, { transient: 4 }).transitions).reason, 'failure-ratio');
  });

  test('an invalid patch is ignored with a reason naming field and value, and the state is unchanged', () => {
    const s = tripped(fresh(), T0);
    const r = go(s, { type: 'configure', config: { minSamples: 0 } }, T0 + 1);
    assert.deepEqual(r.transitions, []);
    assert.deepEqual(r.state, s);
    assert.match(r.ignored ?? '', /configuration rejected/);
    assert.match(r.ignored ?? '', /minSamples: .*\(got 0\)/);
  });

  test('a patch with an unknown field is ignored', () => {
    const s = fresh();
    const r = go(s, { type: 'configure', config: { cooldown: 5 } as unknown as PolicyConfigInput }, T0);
    assert.deepEqual(r.state, s);
    assert.match(r.ignored ?? '', /"cooldown"/);
  });

  test('configure bounds refused: a configure past a bound is ignored', () => {
    const s = fresh();
    const r = go(s, { type: 'configure', config: { cooldownMs: 1e15 } }, T0);
    assert.deepEqual(r.transitions, []);
    assert.deepEqual(r.state, s);
    assert.match(r.ignored ?? '', /cooldownMs: must be at most 2592000000 \(30 days\) \(got 1000000000000000\)/);
    // The grown cooldown too: 10 days x the default cooldownMaxFactor (8) is past 30 days.
    const grown = go(s, { type: 'configure', config: { cooldownMs: 10 * 86_400_000 } }, T0);
    assert.deepEqual(grown.state, s);
    assert.match(grown.ignored ?? '', /cooldownMs: x cooldownMaxFactor \(8\) must be at most 2592000000/);
    const within = go(s, { type: 'configure', config: { cooldownMs: 3 * 86_400_000 } }, T0);
    assert.equal(within.state.config.cooldownMs, 3 * 86_400_000);
  });

  test('a patch that breaks the window shape is ignored', () => {
    const s = fresh();
    const r = go(s, { type: 'configure', config: { bucketMs: 60_000 } }, T0);
    assert.deepEqual(r.state, s);
    assert.match(r.ignored ?? '', /bucketMs: must be <= windowMs \(30000\) \(got 60000\)/);
  });

  test('shrinking the window drops buckets that fall outside it', () => {
    let s = report(fresh(), T0, { transient: 5 }).state;
    s = report(s, T0 + 20_000, { success: 5 }).state;
    const r = go(s, { type: 'configure', config: { windowMs: 10_000 } }, T0 + 20_000);
    assert.equal(r.state.window.length, 1);
    assert.equal(windowFigures(r.state, T0 + 20_000).failures, 0);
  });

  test('configuring keeps probe tokens already granted and the half-open round', () => {
    const { state, now } = halfOpen();
    const g = grant(state, now);
    const r = go(g.state, { type: 'configure', config: { probesToClose: 1 } }, now + 1);
    const t = only(r.transitions);
    assert.deepEqual([t.from, t.to], ['half-open', 'half-open']);
    assert.deepEqual(r.state.probes, [g.token]);
    const closed = go(r.state, { type: 'probe-result', generation: g.token.generation, outcome: 'success' }, now + 2);
    assert.equal(only(closed.transitions).reason, 'probes-succeeded');
  });

  test('a new close rule while half-open starts the probe round again, so no round closes on fewer successes or more trials than either rule allows', () => {
    const { state, now } = halfOpen({ probesToClose: 2, probeTrials: 4 });
    let s = state;
    let t = now;
    const probe = (outcome: 'success' | 'transient') => {
      const g = grant(s, ++t, `r${t}`);
      const r = go(g.state, { type: 'probe-result', generation: g.token.generation, outcome }, ++t);
      s = r.state;
      return r;
    };
    probe('success');
    probe('transient');
    probe('transient');
    assert.deepEqual([s.phase, s.probeSuccesses, s.probeFailures], ['half-open', 1, 2]);
    // 2 of at most 2 trials now: the round so far has had 3.
    const r = go(s, { type: 'configure', config: { probeTrials: 2 } }, ++t);
    assert.equal(only(r.transitions).detail, 'configuration changed: probeTrials; the probe round starts again');
    assert.deepEqual([r.state.probeSuccesses, r.state.probeFailures], [0, 0]);
    s = r.state;
    assert.equal(probe('success').transitions.length, 0);
    const closed = probe('success');
    assert.equal(only(closed.transitions).reason, 'probes-succeeded');
    assert.match(only(closed.transitions).detail, /2 consecutive successful probes$/);
  });

  test('a configure that leaves the close rule alone keeps the round', () => {
    const { state, now } = halfOpen({ probesToClose: 2 });
    const g = grant(state, now, 'a');
    const one = go(
      g.state,
      { type: 'probe-result', generation: g.token.generation, outcome: 'success' },
      now + 1,
    ).state;
    assert.equal(go(one, { type: 'configure', config: { minSamples: 4 } }, now + 2).state.probeSuccesses, 1);
  });

  test('lowering maxConcurrentProbes keeps granted tokens but grants no new one above the new limit', () => {
    const { state, now } = halfOpen({ maxConcurrentProbes: 3 });
    let s = state;
    for (const id of ['a', 'b', 'c']) s = grant(s, now, id).state;
    s = go(s, { type: 'configure', config: { maxConcurrentProbes: 1 } }, now + 1).state;
    assert.equal(s.probes.length, 3);
    const r = go(s, { type: 'probe-request', requestId: 'd', requester: 'w' }, now + 2);
    assert.equal(r.decision?.kind, 'denied');
  });
});

describe('permit', () => {
  test('closed: allow at full allowance, no probe needed', () => {
    assert.deepEqual(permit(fresh(), T0), {
      state: 'closed',
      allow: true,
      retryAfterMs: null,
      allowance: 1,
      probeRequired: false,
    });
  });

  test('open: refuse with the remaining cooldown', () => {
    const s = tripped(fresh(), T0);
    assert.deepEqual(permit(s, T0 + 12_000), {
      state: 'open',
      allow: false,
      retryAfterMs: 18_000,
      allowance: 0,
      probeRequired: false,
    });
  });

  test('open with its cooldown over by now: half-open, probes only', () => {
    const s = tripped(fresh(), T0);
    assert.deepEqual(permit(s, T0 + 30_000), {
      state: 'half-open',
      allow: false,
      retryAfterMs: null,
      allowance: 0,
      probeRequired: true,
    });
  });

  test('half-open: refuse ordinary traffic, require a probe token', () => {
    const { state, now } = halfOpen();
    assert.deepEqual(permit(state, now), {
      state: 'half-open',
      allow: false,
      retryAfterMs: null,
      allowance: 0,
      probeRequired: true,
    });
  });

  test('forced-open with a duration: refuse until it ends, then half-open', () => {
    const s = go(fresh(), { type: 'force-open', durationMs: 10_000 }, T0).state;
    assert.deepEqual(permit(s, T0 + 4_000), {
      state: 'forced-open',
      allow: false,
      retryAfterMs: 6_000,
      allowance: 0,
      probeRequired: false,
    });
    assert.equal(permit(s, T0 + 10_000).state, 'half-open');
  });

  test('closed during a ramp: the allowance is below 1', () => {
    const { state, now } = halfOpen();
    const closed = closeByProbes(state, now);
    assert.deepEqual(permit(closed, now + 1_000), {
      state: 'closed',
      allow: true,
      retryAfterMs: null,
      allowance: rampAllowance(closed, now + 1_000),
      probeRequired: false,
    });
    assert.ok(permit(closed, now + 1_000).allowance < 1);
  });

  test('permit does not change the state it reads', () => {
    const s = tripped(fresh(), T0);
    const copy = structuredClone(s);
    permit(s, T0 + 100_000);
    assert.deepEqual(s, copy);
  });
});

describe('transition records', () => {
  test('a trip record carries at, from, to, reason, detail, figures and cooldownMs, and matches the state', () => {
    const before = report(fresh(), T0, { success: 4 }).state;
    const r = step(before, { type: 'report', counts: { success: 6, transient: 10 } }, T0 + 500, 0.25);
    const t = only(r.transitions);
    assert.deepEqual(Object.keys(t).sort(), ['at', 'cooldownMs', 'detail', 'figures', 'from', 'reason', 'to']);
    assert.equal(t.at, T0 + 500);
    assert.equal(typeof t.detail, 'string');
    assert.deepEqual(t.figures, windowFigures(r.state, T0 + 500));
    assert.equal(t.cooldownMs, Math.round(30_000 * (1 + 0.2 * (2 * 0.25 - 1))));
    assert.equal(r.state.cooldownUntil, T0 + 500 + t.cooldownMs);
  });

  test("records from one step come in order: time-driven first, then the event's", () => {
    const forced = go(fresh({ minSamples: 1 }), { type: 'force-open', durationMs: 1_000 }, T0).state;
    const r = report(forced, T0 + 1_000, { transient: 1 });
    assert.deepEqual(
      r.transitions.map((t) => [t.from, t.to, t.reason]),
      [['forced-open', 'half-open', 'force-expired']],
    );
    const c = go(tripped(fresh(), T0), { type: 'force-close' }, T0 + 30_000);
    assert.deepEqual(
      c.transitions.map((t) => [t.at, t.from, t.to, t.reason]),
      [
        [T0 + 30_000, 'open', 'half-open', 'cooldown-elapsed'],
        [T0 + 30_000, 'half-open', 'forced-closed', 'forced-close'],
      ],
    );
  });

  test('a time-driven transition is recorded when it fell due, not when the next event arrived', () => {
    const opened = tripped(fresh(), T0);
    const late = report(opened, T0 + 45_000, { success: 1 });
    assert.deepEqual(
      late.transitions.map((t) => [t.at, t.reason]),
      [[T0 + 30_000, 'cooldown-elapsed']],
    );
    const forced = go(fresh(), { type: 'force-open', durationMs: 5_000 }, T0).state;
    const expired = tick(forced, T0 + 60_000);
    assert.deepEqual(
      expired.transitions.map((t) => [t.at, t.reason]),
      [[T0 + 5_000, 'force-expired']],
    );
  });

  test('non-trip records carry no cooldown or figures', () => {
    const r = go(fresh(), { type: 'force-close' }, T0);
    const t = only(r.transitions);
    assert.equal(t.cooldownMs, undefined);
    assert.equal(t.figures, undefined);
  });
});
