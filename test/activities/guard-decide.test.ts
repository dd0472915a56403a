import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { BreakerStateName, BreakerView } from '../../src/breaker';
import {
  CLOSED_VIEW,
  isFinal,
  nextStep,
  START,
  type DecideOptions,
  type FinalStep,
  type GuardStep,
  type OwnState,
  type ProbeAnswer,
  type Progress,
} from '../../src/activities/guard/decide';

// The guard's decision (src/activities/guard/decide.ts) is a pure function of the view, this process's own state
// for the key, the options and the clock. These properties hold for any of them; the guard's own tests (against
// a real entity) hold the loop around it to the same behaviour.

const NUM_RUNS = 400;
const T0 = Date.UTC(2031, 4, 6, 12, 0, 0);

const STATES: readonly BreakerStateName[] = [
  'closed',
  'open',
  'half-open',
  'forced-open',
  'forced-closed',
  'metrics-only',
];

/** A time near `now` (most of them), null, or any time at all. */
const timeArb = (now: number, nil = true): fc.Arbitrary<number | null> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: -40_000, max: 40_000 }).map((d) => now + d) },
    { weight: nil ? 2 : 0, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.integer({ min: -(2 ** 50), max: 2 ** 50 }) },
  );

const viewArb = (now: number): fc.Arbitrary<BreakerView> =>
  fc
    .record(
      {
        state: fc.constantFrom(...STATES),
        cooldownUntil: timeArb(now),
        forcedUntil: timeArb(now),
        rampStartedAt: timeArb(now),
        rampMs: fc.integer({ min: 0, max: 60_000 }),
        rampFloor: fc.double({ min: 0.01, max: 1, noNaN: true }),
        probesOutstanding: fc.nat(4),
        maxConcurrentProbes: fc.integer({ min: 1, max: 3 }),
        generation: fc.nat(100),
        rate: fc.option(
          fc.record({ rateLimit: fc.double({ min: 0.01, max: 1_000, noNaN: true }), activeReporters: fc.nat(50) }),
          { nil: undefined },
        ),
        pacedUntil: fc.option(timeArb(now, false), { nil: undefined }),
        fleet: fc.option(
          fc.record({ failureRatio: fc.double({ min: 0, max: 1, noNaN: true }), reporters: fc.nat(20) }),
          { nil: undefined },
        ),
      },
      { noNullPrototype: true },
    )
    .map(({ rate, pacedUntil, fleet, ...v }) => ({
      ...v,
      mode: v.state === 'forced-open' || v.state === 'forced-closed' || v.state === 'metrics-only' ? v.state : 'auto',
      phase: v.state === 'open' || v.state === 'half-open' ? v.state : 'closed',
      ...(rate ?? {}),
      ...(pacedUntil !== undefined && pacedUntil !== null ? { pacedUntil } : {}),
      ...(fleet ? { fleet } : {}),
    }));

/** The view as read: a view, null (no entity) or undefined (unreachable or wedged). */
const readArb = (now: number): fc.Arbitrary<BreakerView | null | undefined> =>
  fc.oneof(
    { weight: 6, arbitrary: viewArb(now) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 2, arbitrary: fc.constant(undefined) },
  );

const ownArb = (now: number): fc.Arbitrary<OwnState> =>
  fc.record(
    {
      alarm: fc.boolean(),
      pausedUntil: fc.oneof(
        fc.constant(0),
        timeArb(now, false).map((t) => t ?? 0),
      ),
      lastView: fc.option(viewArb(now), { nil: null }),
      share: fc.option(fc.double({ min: 0.01, max: 1_000, noNaN: true }), { nil: null }),
      spreadSince: fc.option(
        timeArb(now, false).map((t) => t ?? now),
        { nil: undefined },
      ),
      asking: fc.boolean(),
      nextProbe: fc.boolean(),
      failStreak: fc.nat(4),
      wedged: fc.boolean(),
      blind: fc.boolean(),
      quarantine: fc.option(
        fc.record({
          reason: fc.constantFrom('local failures', 'fleet served'),
          nextProbeAt: timeArb(now, false).map((t) => t ?? now),
          probing: fc.boolean(),
        }),
        {
          nil: null,
        },
      ),
    },
    { noNullPrototype: true },
  );

const optionsArb: fc.Arbitrary<DecideOptions> = fc.record(
  {
    failureFlushMs: fc.integer({ min: 1, max: 500 }),
    maxPaceWaitMs: fc.integer({ min: 0, max: 60_000 }),
    cacheTtlMs: fc.integer({ min: 1, max: 5_000 }),
    probeSpreadMs: fc.integer({ min: 0, max: 5_000 }),
    probeJitter: fc.double({ min: 0, max: 0.999, noNaN: true }),
    holdAfterFailures: fc.nat(3),
    holdMs: fc.nat(2_000),
    config: fc.option(
      fc.record({
        maxRequestsPerSecond: fc.option(fc.double({ min: 0.01, max: 100, noNaN: true }), { nil: undefined }),
      }),
      { nil: undefined },
    ),
  },
  {
    requiredKeys: ['failureFlushMs', 'maxPaceWaitMs', 'cacheTtlMs', 'probeSpreadMs', 'probeJitter'],
    noNullPrototype: true,
  },
) as fc.Arbitrary<DecideOptions>;

const answerArb: fc.Arbitrary<ProbeAnswer> = fc.oneof(
  fc.record(
    {
      kind: fc.constant('probe' as const),
      token: fc.record(
        {
          generation: fc.nat(100),
          requestId: fc.constant('w1/1/1'),
          holder: fc.constant('w1'),
          grantedAt: fc.nat(),
          leaseUntil: fc.nat(),
        },
        { noNullPrototype: true },
      ),
    },
    { noNullPrototype: true },
  ),
  fc.record(
    {
      kind: fc.constant('proceed' as const),
      state: fc.constantFrom(...STATES),
      allowance: fc.double({ min: 0.01, max: 1, noNaN: true }),
    },
    { noNullPrototype: true },
  ),
  fc.record(
    {
      kind: fc.constant('refused' as const),
      state: fc.constantFrom(...STATES),
      retryAfterMs: fc.option(fc.nat(10_000), { nil: null }),
      reason: fc.constant('half-open: another worker holds the probe token'),
    },
    { noNullPrototype: true },
  ),
);

const progressArb: fc.Arbitrary<Progress> = fc.record(
  {
    alarmAwaited: fc.boolean(),
    read: fc.boolean(),
    pauseWaited: fc.boolean(),
    share: fc.option(fc.option(fc.double({ min: 0.01, max: 1_000, noNaN: true }), { nil: null }), { nil: undefined }),
    paced: fc.boolean(),
    answer: fc.option(answerArb, { nil: undefined }),
  },
  { requiredKeys: ['alarmAwaited', 'read', 'pauseWaited', 'paced'], noNullPrototype: true },
);

/** One question to the decision: any view, state, options, clock and progress. */
const caseArb = fc
  .integer({ min: 0, max: 2 ** 45 })
  .chain((now) =>
    fc.record(
      { now: fc.constant(now), view: readArb(now), own: ownArb(now), o: optionsArb, p: progressArb },
      { noNullPrototype: true },
    ),
  );

/** The same, at the point where the view has been read and nothing else is pending (the decision proper). */
const readCaseArb = caseArb.map((c) => ({ ...c, p: { ...c.p, read: true, alarmAwaited: true, answer: undefined } }));

const ask = (c: { view: BreakerView | null | undefined; own: OwnState; o: DecideOptions; now: number; p: Progress }) =>
  nextStep(c.view, c.own, c.o, c.now, c.p);

/**
 * The guard's loop with the I/O played by the test: the view read is always `view`, a failure report lands
 * at once, the pacer answers `share`, the entity answers the probe request with `answer`, and the clock moves
 * only with the waits. Returns the decision and the steps taken.
 */
function run(
  view: BreakerView | null | undefined,
  own0: OwnState,
  o: DecideOptions,
  now0: number,
  share: number | null,
  answer: ProbeAnswer,
) {
  let own = { ...own0 };
  let now = now0;
  let p: Progress = { ...START };
  const steps: GuardStep[] = [];
  for (let i = 0; i < 50; i++) {
    const { step, spreadSince } = nextStep(view, own, o, now, p);
    steps.push(step);
    if (spreadSince === null) own = { ...own, spreadSince: undefined };
    else if (spreadSince !== undefined) own = { ...own, spreadSince };
    if (isFinal(step)) return { decision: step, steps };
    switch (step.kind) {
      case 'await-alarm':
        own = { ...own, alarm: false };
        p = { ...p, alarmAwaited: true };
        break;
      case 'read':
        p = { ...p, read: true };
        break;
      case 'wait':
        p =
          step.then === 'restart'
            ? { ...START }
            : {
                ...p,
                pauseWaited: step.why === 'paused' || p.pauseWaited,
                read: false,
                heldSince: step.why === 'hold' ? (p.heldSince ?? now) : p.heldSince,
              };
        now = step.untilMs;
        break;
      case 'share':
        p = { ...p, share };
        break;
      case 'pace':
        p = { ...p, paced: true, read: step.then !== 'reread' };
        break;
      case 'request-probe':
        p = { ...p, answer };
        break;
    }
  }
  assert.fail(`no decision after 50 steps: ${JSON.stringify(steps.slice(-5))}`);
}

const runArb = fc.integer({ min: 0, max: 2 ** 45 }).chain((now) =>
  fc.record(
    {
      now: fc.constant(now),
      view: readArb(now),
      own: ownArb(now),
      o: optionsArb,
      share: fc.option(fc.double({ min: 0.01, max: 1_000, noNaN: true }), { nil: null }),
      answer: answerArb,
    },
    { noNullPrototype: true },
  ),
);
interface RunCase {
  view: BreakerView | null | undefined;
  own: OwnState;
  o: DecideOptions;
  now: number;
  share: number | null;
  answer: ProbeAnswer;
}
const play = (c: RunCase) => run(c.view, c.own, c.o, c.now, c.share, c.answer);

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

const openUntil = (v: BreakerView | null | undefined, now: number): boolean =>
  !!v && v.state === 'open' && (v.cooldownUntil === null || v.cooldownUntil > now);
const forcedOpen = (v: BreakerView | null | undefined, now: number): boolean =>
  !!v && v.state === 'forced-open' && (v.forcedUntil === null || v.forcedUntil > now);
const lets = (s: FinalStep | GuardStep): boolean =>
  s.kind === 'proceed' || s.kind === 'fail-open' || s.kind === 'probe';

describe('the guard decision: properties', () => {
  test('total: any view, state, options, clock and progress give a step, and never mutate their inputs', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const frozen = deepFreeze(structuredClone(c));
        const { step } = ask(frozen);
        assert.ok(typeof step.kind === 'string');
        if (step.kind === 'refuse')
          assert.ok(step.retryAfterMs === null || step.retryAfterMs >= 0, `retryAfterMs ${step.retryAfterMs}`);
        if (step.kind === 'proceed' || step.kind === 'fail-open')
          assert.ok(step.allowance > 0 && step.allowance <= 1, `allowance ${step.allowance}`);
      }),
      { numRuns: NUM_RUNS * 2 },
    );
  });

  test('pure: the same inputs give the same answer', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        assert.deepEqual(ask(c), ask(structuredClone(c)));
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('waits are in the future and bounded: a pause by maxPaceWaitMs, a probe spread share by probeSpreadMs, a hold by holdMs, a failure report by 4 x failureFlushMs', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { step } = ask(c);
        if (step.kind === 'await-alarm') assert.equal(step.maxMs, 4 * c.o.failureFlushMs);
        if (step.kind !== 'wait') return;
        assert.ok(step.untilMs > c.now, `wait until ${step.untilMs}, now ${c.now}`);
        const bound = step.why === 'paused' ? c.o.maxPaceWaitMs : step.why === 'hold' ? c.o.holdMs! : c.o.probeSpreadMs;
        assert.ok(step.untilMs - c.now <= bound, `${step.why}: ${step.untilMs - c.now} ms > ${bound}`);
      }),
      { numRuns: NUM_RUNS * 2 },
    );
  });

  test('an open breaker before its retry time is never called, nor probed', () => {
    fc.assert(
      fc.property(readCaseArb, (c) => {
        fc.pre(openUntil(c.view, c.now));
        const { step } = ask(c);
        assert.ok(
          !lets(step) && step.kind !== 'request-probe' && step.kind !== 'share' && step.kind !== 'pace',
          step.kind,
        );
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('a forced-open view always refuses (until its end)', () => {
    fc.assert(
      fc.property(readCaseArb, (c) => {
        const view = c.view
          ? { ...c.view, state: 'forced-open' as const, mode: 'forced-open' as const, forcedUntil: null }
          : c.view;
        fc.pre(forcedOpen(view, c.now));
        const { step } = ask({ ...c, view, p: { ...c.p, pauseWaited: false } });
        assert.equal(step.kind, 'refuse');
        assert.equal(step.kind === 'refuse' && step.reason, 'breaker forced-open');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('an unreachable (or wedged) entity fails open, never refused for the breaker: only a 429 pause too long to wait or the quarantine refuse', () => {
    fc.assert(
      fc.property(runArb, (c) => {
        const { decision } = play({ ...c, view: undefined });
        if (decision.kind === 'refuse') assert.match(decision.reason, /^(paced|quarantined): /);
        else {
          assert.equal(decision.kind, 'fail-open');
          assert.equal(decision.kind === 'fail-open' && decision.reason, c.own.wedged ? 'wedged' : 'unreachable');
        }
      }),
      { numRuns: NUM_RUNS },
    );
    fc.assert(
      fc.property(runArb, (c) => {
        const own = {
          ...c.own,
          pausedUntil: 0,
          lastView: c.own.lastView && { ...c.own.lastView, pacedUntil: undefined },
          quarantine: null,
        } as OwnState;
        assert.equal(play({ ...c, own, view: undefined }).decision.kind, 'fail-open');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test("half-open with every token out never asks for a probe, unless the token out was this process's and just succeeded", () => {
    fc.assert(
      fc.property(runArb, (c) => {
        fc.pre(!!c.view && !c.own.nextProbe);
        const view = {
          ...c.view,
          state: 'half-open' as const,
          phase: 'half-open' as const,
          mode: 'auto' as const,
          probesOutstanding: c.view.maxConcurrentProbes,
        };
        const { decision, steps } = play({ ...c, view });
        assert.ok(!steps.some((s) => s.kind === 'request-probe'));
        assert.equal(decision.kind, 'refuse');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('this process asks for the token once at a time: while it is asking, a half-open decision never asks again', () => {
    fc.assert(
      fc.property(readCaseArb, (c) => {
        fc.pre(!c.p.answer);
        assert.notEqual(ask({ ...c, own: { ...c.own, asking: true } }).step.kind, 'request-probe');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('the quarantine refuses only calls the breaker would let through, and lets through at most its one probe call', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { step } = ask(c);
        if (step.kind === 'refuse' && step.reason.startsWith('quarantined: ')) {
          const without = ask({ ...c, own: { ...c.own, quarantine: null } }).step;
          assert.ok(without.kind === 'proceed' || without.kind === 'fail-open', without.kind);
        }
        if (c.own.quarantine && (step.kind === 'proceed' || step.kind === 'fail-open')) {
          assert.equal(step.quarantineProbe, true);
          assert.ok(!c.own.quarantine.probing && c.now >= c.own.quarantine.nextProbeAt);
        }
        if (!c.own.quarantine && (step.kind === 'proceed' || step.kind === 'fail-open'))
          assert.equal(step.quarantineProbe, false);
      }),
      { numRuns: NUM_RUNS * 2 },
    );
  });

  test('a process the entity does not hear never proceeds as if it did: its calls fail open (reports-dropped)', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { step } = ask({ ...c, own: { ...c.own, blind: true } });
        assert.notEqual(step.kind, 'proceed');
      }),
      { numRuns: NUM_RUNS },
    );
  });

  test('the loop always ends in a decision, and lets a call through only when the breaker would (or it fails open)', () => {
    fc.assert(
      fc.property(runArb, (c) => {
        const { decision, steps } = play(c);
        const asked = steps.some((s) => s.kind === 'request-probe');
        if (decision.kind === 'probe') assert.ok(asked, 'a token only from a request');
        if (decision.kind === 'proceed' && !asked)
          assert.ok(
            c.view === null ||
              c.view?.state === 'closed' ||
              c.view?.state === 'forced-closed' ||
              c.view?.state === 'metrics-only',
            c.view?.state,
          );
        if (decision.kind === 'fail-open' && decision.reason !== 'reports-dropped') assert.equal(c.view, undefined);
        // The rate is asked at most once, and a slot taken at most once.
        assert.ok(steps.filter((s) => s.kind === 'pace').length <= 1);
        assert.ok(
          steps.filter((s) => s.kind === 'share').length <= 1 ||
            steps.some((s) => s.kind === 'wait' && s.then === 'restart'),
        );
      }),
      { numRuns: NUM_RUNS },
    );
  });
});

describe('the guard decision: examples', () => {
  const o: DecideOptions = {
    failureFlushMs: 50,
    maxPaceWaitMs: 30_000,
    cacheTtlMs: 500,
    probeSpreadMs: 1_000,
    probeJitter: 0.25,
  };
  const own: OwnState = {
    alarm: false,
    pausedUntil: 0,
    lastView: null,
    share: null,
    spreadSince: undefined,
    asking: false,
    wedged: false,
    blind: false,
    quarantine: null,
  };
  const read: Progress = { ...START, read: true };

  test('first the failure report lands, then the view is read', () => {
    assert.deepEqual(nextStep(undefined, { ...own, alarm: true }, o, T0, START).step, {
      kind: 'await-alarm',
      maxMs: 200,
    });
    assert.deepEqual(nextStep(undefined, own, o, T0, { ...START, alarmAwaited: true }).step, { kind: 'read' });
  });

  test('closed: the rate is asked, then the call proceeds at the ramp allowance', () => {
    const ramp = { ...CLOSED_VIEW, rampStartedAt: T0 - 5_000, rampMs: 10_000, rampFloor: 0.1 };
    assert.deepEqual(nextStep(ramp, own, o, T0, read).step, { kind: 'share', allowance: 0.55 });
    assert.deepEqual(nextStep(ramp, own, o, T0, { ...read, share: null }), {
      step: { kind: 'proceed', state: 'closed', allowance: 0.55, quarantineProbe: false },
      spreadSince: null,
    });
    // A rate-limited endpoint: a slot at the share, then the state read again, then the call (never paced twice).
    assert.deepEqual(nextStep(ramp, own, o, T0, { ...read, share: 2 }).step, { kind: 'pace', rate: 2, then: 'reread' });
    assert.equal(nextStep(ramp, own, o, T0, { ...read, share: 2, paced: true }).step.kind, 'proceed');
  });

  test('open: refused with the cooldown left; after it, half-open: the spread share, then the token', () => {
    const open: BreakerView = { ...CLOSED_VIEW, state: 'open', phase: 'open', cooldownUntil: T0 + 4_000 };
    assert.deepEqual(nextStep(open, own, o, T0, read).step, {
      kind: 'refuse',
      state: 'open',
      retryAfterMs: 4_000,
      reason: 'breaker open',
    });
    // The cooldown ended 100 ms ago for the whole fleet: this process's share of the spread is 250 ms.
    assert.deepEqual(nextStep(open, own, o, T0 + 4_100, read), {
      step: { kind: 'wait', untilMs: T0 + 4_250, why: 'probe-spread', then: 'restart' },
    });
    assert.deepEqual(nextStep(open, own, o, T0 + 4_250, read).step, { kind: 'request-probe' });
    assert.deepEqual(nextStep(open, { ...own, asking: true }, o, T0 + 4_250, read).step.kind, 'refuse');
    // A view already half-open: the spread runs from when this process first saw it so (remembered).
    const half: BreakerView = { ...CLOSED_VIEW, state: 'half-open', phase: 'half-open' };
    assert.deepEqual(nextStep(half, own, o, T0, read), {
      step: { kind: 'wait', untilMs: T0 + 250, why: 'probe-spread', then: 'restart' },
      spreadSince: T0,
    });
    assert.deepEqual(nextStep(half, { ...own, spreadSince: T0 }, o, T0 + 250, read).step, { kind: 'request-probe' });
    assert.deepEqual(
      nextStep(half, own, o, T0, {
        ...read,
        answer: {
          kind: 'refused',
          state: 'half-open',
          retryAfterMs: 500,
          reason: 'half-open: another worker holds the probe token',
        },
      }),
      {
        step: {
          kind: 'refuse',
          state: 'half-open',
          retryAfterMs: 500,
          reason: 'half-open: another worker holds the probe token',
        },
        spreadSince: null,
      },
    );
  });

  test("a process whose probe just succeeded asks for the round's next token at once, with no spread, even while the view shows its token out", () => {
    const held: BreakerView = {
      ...CLOSED_VIEW,
      state: 'half-open',
      phase: 'half-open',
      probesOutstanding: 1,
      maxConcurrentProbes: 1,
    };
    assert.deepEqual(
      nextStep(held, own, o, T0, read).step.kind,
      'refuse',
      'another process: refused until a view shows the token free',
    );
    assert.deepEqual(nextStep(held, { ...own, nextProbe: true }, o, T0, read), {
      step: { kind: 'request-probe' },
      spreadSince: null,
    });
    assert.equal(
      nextStep(held, { ...own, nextProbe: true, asking: true }, o, T0, read).step.kind,
      'refuse',
      'one request at a time still',
    );
    assert.equal(
      nextStep(CLOSED_VIEW, { ...own, nextProbe: true }, o, T0, { ...read, share: null }).step.kind,
      'proceed',
      'closed by that probe: no token needed',
    );
  });

  test('after failures in a row, a call the closed breaker lets through is held, reading the verdict again each quarter of holdMs, at most holdMs', () => {
    const ho: DecideOptions = { ...o, holdAfterFailures: 2, holdMs: 1_000 };
    const read0 = { ...read, share: null };
    assert.equal(
      nextStep(CLOSED_VIEW, { ...own, failStreak: 1 }, ho, T0, read0).step.kind,
      'proceed',
      'one failure: no hold',
    );
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, failStreak: 2 }, ho, T0, read0).step, {
      kind: 'wait',
      untilMs: T0 + 250,
      why: 'hold',
      then: 'reread',
    });
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, failStreak: 5 }, ho, T0 + 900, { ...read0, heldSince: T0 }).step, {
      kind: 'wait',
      untilMs: T0 + 1_000,
      why: 'hold',
      then: 'reread',
    });
    assert.equal(
      nextStep(CLOSED_VIEW, { ...own, failStreak: 5 }, ho, T0 + 1_000, { ...read0, heldSince: T0 }).step.kind,
      'proceed',
      'the hold has ended',
    );
    // The verdict came: an open breaker refuses at once; no hold without an entity, with the option off, or after a success.
    const open: BreakerView = { ...CLOSED_VIEW, state: 'open', phase: 'open', cooldownUntil: T0 + 4_000 };
    assert.equal(
      nextStep(open, { ...own, failStreak: 5 }, ho, T0 + 300, { ...read0, heldSince: T0 }).step.kind,
      'refuse',
    );
    assert.equal(nextStep(null, { ...own, failStreak: 5 }, ho, T0, read0).step.kind, 'proceed');
    assert.equal(
      nextStep(CLOSED_VIEW, { ...own, failStreak: 5 }, { ...ho, holdAfterFailures: 0 }, T0, read0).step.kind,
      'proceed',
    );
    assert.equal(nextStep(CLOSED_VIEW, { ...own, failStreak: 0 }, ho, T0, read0).step.kind, 'proceed');
  });

  test("a 429's pause is waited out (then the view read again), or refused when longer than maxPaceWaitMs", () => {
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, pausedUntil: T0 + 2_000 }, o, T0, read).step, {
      kind: 'wait',
      untilMs: T0 + 2_000,
      why: 'paused',
      then: 'reread',
    });
    assert.deepEqual(nextStep({ ...CLOSED_VIEW, pacedUntil: T0 + 40_000 }, own, o, T0, read).step, {
      kind: 'refuse',
      state: 'closed',
      retryAfterMs: 40_000,
      reason: `paced: the endpoint asked to wait (Retry-After) until ${new Date(T0 + 40_000).toISOString()}`,
    });
  });

  test('unreachable: paced at the share last known, then failing open; wedged says so', () => {
    assert.deepEqual(nextStep(undefined, { ...own, share: 4 }, o, T0, read).step, {
      kind: 'pace',
      rate: 4,
      then: 'decide',
    });
    assert.deepEqual(nextStep(undefined, { ...own, share: 4 }, o, T0, { ...read, paced: true }).step, {
      kind: 'fail-open',
      reason: 'unreachable',
      state: 'closed',
      allowance: 1,
      quarantineProbe: false,
    });
    assert.deepEqual(
      nextStep(undefined, { ...own, lastView: { ...CLOSED_VIEW, rateLimit: 10, activeReporters: 4 } }, o, T0, read)
        .step,
      { kind: 'pace', rate: 2, then: 'decide' },
    );
    assert.deepEqual(nextStep(undefined, own, { ...o, config: { maxRequestsPerSecond: 7 } }, T0, read).step, {
      kind: 'pace',
      rate: 7,
      then: 'decide',
    });
    assert.equal(
      nextStep(undefined, { ...own, wedged: true }, o, T0, read).step.kind === 'fail-open' && 'wedged',
      'wedged',
    );
  });

  test('quarantined: refused but for one call per interval; blind: failing open (reports-dropped)', () => {
    const q = { reason: 'five local failures', nextProbeAt: T0 + 1_500, probing: false };
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, quarantine: q }, o, T0, { ...read, share: null }).step, {
      kind: 'refuse',
      state: 'closed',
      retryAfterMs: 1_500,
      reason: 'quarantined: five local failures',
    });
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, quarantine: q }, o, T0 + 1_500, { ...read, share: null }).step, {
      kind: 'proceed',
      state: 'closed',
      allowance: 1,
      quarantineProbe: true,
    });
    assert.deepEqual(nextStep(CLOSED_VIEW, { ...own, blind: true }, o, T0, { ...read, share: null }).step, {
      kind: 'fail-open',
      reason: 'reports-dropped',
      state: 'closed',
      allowance: 1,
      quarantineProbe: false,
    });
    // Both: the quarantine's probe call goes through failing open, still marked as the quarantine's probe.
    assert.deepEqual(
      nextStep(CLOSED_VIEW, { ...own, blind: true, quarantine: q }, o, T0 + 1_500, { ...read, share: null }).step,
      {
        kind: 'fail-open',
        reason: 'reports-dropped',
        state: 'closed',
        allowance: 1,
        quarantineProbe: true,
      },
    );
  });
});
