import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_POLICY_CONFIG,
  initialState,
  migratePolicyState,
  parsePolicyConfig,
  step,
  type CarriedPolicyState,
  type PolicyConfig,
  type PolicyState,
  type StepResult,
} from '../../src/breaker';

const T0 = Date.UTC(2001, 2, 5, 6, 7, 8);
const MID = 0.5;

/** Each setting added after version 1's first shape, and what its absence meant then: its rule was off. */
const BEFORE_THE_SETTING = {
  fastWindowFollowsLatency: false,
  fastWindowFollowsFloor: false,
  volumeFloor: 5,
  smallFleetFloor: null,
  quorum: 1,
  slowCallMs: null,
  retryAfterPauses: false,
  flapWindowMs: null,
  probeIntervalMs: null,
  probeBackoff: 1,
  probeTrials: null,
  maxRequestsPerSecond: null,
} as const satisfies Partial<PolicyConfig>;
type LaterSetting = keyof typeof BEFORE_THE_SETTING;
const LATER = Object.keys(BEFORE_THE_SETTING) as LaterSetting[];

/**
 * A configuration naming every later setting with a value that is neither its 0.x meaning nor (where the
 * setting allows) today's default, and a few older ones off their defaults too: what is kept shows.
 */
const NAMED: PolicyConfig = parsePolicyConfig({
  windowMs: 60_000,
  minSamples: 10,
  cooldownMs: 12_000,
  fastWindowFollowsLatency: true,
  fastWindowFollowsFloor: true,
  volumeFloor: 6,
  smallFleetFloor: 4,
  quorum: 3,
  slowCallMs: 7_000,
  retryAfterPauses: true,
  flapWindowMs: 90_000,
  probeIntervalMs: 2_000,
  probeBackoff: 4,
  probeTrials: 5,
  maxRequestsPerSecond: 50,
});

/**
 * `state` as version 1 carried it: without the settings `missing` and without the fields added in version 2,
 * as plain JSON (carried across continue-as-new).
 */
function versionOne(state: PolicyState, missing: readonly LaterSetting[] = LATER): CarriedPolicyState {
  const { probeFailures: _p, failedTrials: _f, pacedUntil: _u, ...rest } = state;
  const old: Partial<PolicyConfig> = { ...state.config };
  for (const field of missing) delete old[field];
  return JSON.parse(JSON.stringify({ ...rest, version: 1, config: old })) as CarriedPolicyState;
}

/** Grants a probe at `at` and fails it 100 ms later: the step's result. */
function failProbe(state: PolicyState, at: number): StepResult {
  const granted = step(state, { type: 'probe-request', requestId: 'p', requester: 'w' }, at, MID);
  assert.equal(granted.decision?.kind, 'granted');
  const generation = granted.decision?.kind === 'granted' ? granted.decision.token.generation : -1;
  return step(granted.state, { type: 'probe-result', generation, outcome: 'transient' }, at + 100, MID);
}

describe('migratePolicyState: version 1 to version 2', () => {
  test('the named configuration holds every later setting away from its 0.x meaning, and most from the default', () => {
    for (const field of LATER) assert.notEqual(NAMED[field], BEFORE_THE_SETTING[field], field);
    for (const field of ['volumeFloor', 'smallFleetFloor', 'quorum', 'slowCallMs', 'probeBackoff'] as const)
      assert.notEqual(NAMED[field], DEFAULT_POLICY_CONFIG[field], field);
  });

  for (const field of LATER) {
    test(`a state without ${field} gets its 0.x meaning (${String(BEFORE_THE_SETTING[field])}) and keeps every other setting`, () => {
      const migrated = migratePolicyState(versionOne(initialState(NAMED), [field]));
      assert.equal(migrated.version, 2);
      assert.deepEqual(migrated.config, { ...NAMED, [field]: BEFORE_THE_SETTING[field] });
    });
  }

  test('a state without any later setting runs on the 0.x rules, its older settings kept', () => {
    const migrated = migratePolicyState(versionOne(initialState(NAMED)));
    assert.deepEqual(migrated.config, { ...NAMED, ...BEFORE_THE_SETTING });
    assert.deepEqual(
      [migrated.config.windowMs, migrated.config.minSamples, migrated.config.cooldownMs],
      [60_000, 10, 12_000],
    );
  });

  test('a state with every setting keeps them all', () => {
    assert.deepEqual(migratePolicyState(versionOne(initialState(NAMED), [])).config, NAMED);
  });

  test("a setting neither carried nor added later gets today's default", () => {
    const carried = versionOne(initialState(NAMED), []);
    delete carried.config.slowCallRatio;
    delete carried.config.probeLeaseMs;
    const migrated = migratePolicyState(carried);
    assert.equal(migrated.config.slowCallRatio, DEFAULT_POLICY_CONFIG.slowCallRatio);
    assert.equal(migrated.config.probeLeaseMs, DEFAULT_POLICY_CONFIG.probeLeaseMs);
  });

  test('a setting the state carried as null stays null', () => {
    const carried = versionOne(
      initialState(parsePolicyConfig({ smallFleetFloor: null, slowCallMs: null, volumeFloor: null })),
      [],
    );
    const migrated = migratePolicyState(carried);
    assert.deepEqual(
      [migrated.config.smallFleetFloor, migrated.config.slowCallMs, migrated.config.volumeFloor],
      [null, null, null],
    );
  });

  test('the fields added in version 2 come as none: no failed probes, no failed trials, no pause', () => {
    const migrated = migratePolicyState(versionOne(initialState(NAMED)));
    assert.deepEqual([migrated.probeFailures, migrated.failedTrials, migrated.pacedUntil], [0, 0, null]);
  });

  test('a version-1 state that has them keeps them, and the rest of the state as it was', () => {
    const opened = step(initialState(NAMED), { type: 'report', counts: { transient: 10 } }, T0, MID).state;
    assert.equal(opened.phase, 'open');
    const carried = {
      ...opened,
      version: 1,
      probeFailures: 1,
      failedTrials: 2,
      pacedUntil: T0 + 5_000,
    } satisfies CarriedPolicyState;
    assert.deepEqual(migratePolicyState(carried), {
      ...opened,
      probeFailures: 1,
      failedTrials: 2,
      pacedUntil: T0 + 5_000,
    });
  });

  test('the carried state is not changed, and migrating again returns the migrated state itself', () => {
    const carried = versionOne(initialState(NAMED));
    const copy = structuredClone(carried);
    const migrated = migratePolicyState(carried);
    assert.deepEqual(carried, copy);
    assert.notEqual(migrated, carried);
    assert.equal(migratePolicyState(migrated), migrated);
  });

  test('a migrated state steps on the rules it ran on: a failed probe is another open and waits the grown cooldown', () => {
    const opened = step(
      initialState(parsePolicyConfig({ cooldownJitter: 0 })),
      { type: 'report', counts: { transient: 20 } },
      T0,
      MID,
    ).state;
    const at = opened.cooldownUntil!;
    const failed = failProbe(migratePolicyState(versionOne(opened)), at);
    assert.equal(
      failed.transitions.find((t) => t.reason === 'probe-failed')?.cooldownMs,
      60_000,
      'no probeIntervalMs: the grown cooldown',
    );
    assert.equal(failed.state.consecutiveOpens, 2, 'no flapWindowMs: every open counts');
    // On today's defaults instead: one incident, the next probe within 5 s.
    const today = failProbe(opened, at);
    assert.equal(today.transitions.find((t) => t.reason === 'probe-failed')?.cooldownMs, 5_000);
    assert.equal(today.state.consecutiveOpens, 1);
  });
});

describe('migratePolicyState: version 2', () => {
  test('a version-2 state comes back unchanged, the same object', () => {
    const fresh = initialState(parsePolicyConfig({ quorum: 1 }));
    const opened = step(fresh, { type: 'report', counts: { transient: 20 } }, T0, MID).state;
    for (const s of [fresh, opened]) {
      const copy = structuredClone(s);
      assert.equal(migratePolicyState(s), s);
      assert.deepEqual(s, copy);
    }
  });
});
