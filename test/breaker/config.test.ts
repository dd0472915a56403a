import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ConfigError,
  DEFAULT_POLICY_CONFIG,
  MAX_POLICY_DURATION_MS,
  POLICY_BOUNDS,
  checkPolicyBounds,
  cooldownCapMs,
  latencyBudgetMs,
  maxCooldownMs,
  parsePolicyConfig,
} from '../../src/breaker';

/** Parses `input`, expecting a ConfigError with an issue that names `field` and shows `shown` as the value received. */
function rejected(input: unknown, field: string, shown: string): ConfigError {
  let caught: unknown;
  try {
    parsePolicyConfig(input);
  } catch (err) {
    caught = err;
  }
  assert.ok(
    caught instanceof ConfigError,
    `expected a ConfigError for ${JSON.stringify(input)}, got ${String(caught)}`,
  );
  assert.equal(caught.name, 'ConfigError');
  assert.equal(caught.subject, 'breaker config');
  const issue = caught.issues.find((i) => i.startsWith(`${field}: `));
  assert.ok(issue, `no issue names ${field}: ${JSON.stringify(caught.issues)}`);
  assert.ok(issue.includes(`(got ${shown})`), `issue "${issue}" does not show the value ${shown}`);
  assert.ok(caught.message.startsWith('breaker config: '), caught.message);
  assert.ok(caught.message.includes(issue), `message "${caught.message}" lacks "${issue}"`);
  return caught;
}

describe('defaults', () => {
  test('an empty configuration gets the documented defaults', () => {
    const c = parsePolicyConfig({});
    assert.equal(c.windowMs, 30_000);
    assert.equal(c.bucketMs, 250);
    assert.equal(c.minSamples, 20);
    assert.equal(c.failureRatio, 0.5);
    assert.equal(c.healthyP95Ms, null);
    assert.equal(c.latencyBudgetFactor, 1.5);
    assert.equal(c.latencyBudgetMs, null);
    assert.equal(c.latencyMinSamples, 20);
    assert.equal(c.permanentSurgeCount, 50);
    assert.equal(c.permanentSurgeRatio, 0.5);
    assert.equal(c.cooldownMs, 30_000);
    assert.equal(c.cooldownJitter, 0.2);
    assert.equal(c.cooldownMultiplier, 2);
    assert.equal(c.cooldownMaxFactor, 8);
    assert.equal(c.cooldownDecayMs, 300_000);
    assert.equal(c.probeLeaseMs, 30_000);
    assert.equal(c.maxConcurrentProbes, 1);
    assert.equal(c.probesToClose, 3);
    assert.equal(c.rampMs, 10_000);
    assert.equal(c.rampFloor, 0.1);
  });

  test('an empty configuration gets the rules new breaker entities run on', () => {
    const c = parsePolicyConfig({});
    assert.equal(c.quorum, 2);
    assert.equal(c.probeBackoff, 2);
    assert.equal(c.slowCallMs, 10_000);
    assert.equal(c.fastWindowFollowsLatency, true);
    assert.equal(c.fastWindowFollowsFloor, true);
    assert.equal(c.retryAfterPauses, true);
    assert.equal(c.volumeFloor, 5);
    assert.equal(c.smallFleetFloor, 3);
    assert.equal(c.flapWindowMs, 60_000, 'twice cooldownMs');
    assert.equal(c.probeIntervalMs, 5_000, 'cooldownMs, at most 5 s');
  });

  test('flapWindowMs and probeIntervalMs follow cooldownMs unless named; null turns them off', () => {
    const short = parsePolicyConfig({ cooldownMs: 2_000 });
    assert.deepEqual([short.flapWindowMs, short.probeIntervalMs], [4_000, 2_000]);
    const long = parsePolicyConfig({ cooldownMs: 20 * 86_400_000, cooldownMaxFactor: 1 });
    assert.deepEqual([long.flapWindowMs, long.probeIntervalMs], [MAX_POLICY_DURATION_MS, 5_000], 'at most 30 days');
    const named = parsePolicyConfig({ cooldownMs: 2_000, flapWindowMs: 7_000, probeIntervalMs: 300 });
    assert.deepEqual([named.flapWindowMs, named.probeIntervalMs], [7_000, 300]);
    const off = parsePolicyConfig({ flapWindowMs: null, probeIntervalMs: null });
    assert.deepEqual([off.flapWindowMs, off.probeIntervalMs], [null, null]);
  });

  test('DEFAULT_POLICY_CONFIG, no argument, undefined and null all give the same defaults', () => {
    const expected = parsePolicyConfig({});
    assert.deepEqual(DEFAULT_POLICY_CONFIG, expected);
    assert.deepEqual(parsePolicyConfig(), expected);
    assert.deepEqual(parsePolicyConfig(undefined), expected);
    assert.deepEqual(parsePolicyConfig(null), expected);
  });

  test('named fields override defaults and the rest keep theirs', () => {
    const c = parsePolicyConfig({ minSamples: 5, cooldownMs: 1_000 });
    assert.equal(c.minSamples, 5);
    assert.equal(c.cooldownMs, 1_000);
    assert.equal(c.fastMinSamples, 10, 'the fast window follows minSamples (twice it) unless named');
    assert.equal(c.flapWindowMs, 2_000, 'the flap window follows cooldownMs (twice it) unless named');
    assert.equal(c.probeIntervalMs, 1_000, 'the probe interval follows cooldownMs (at most 5 s) unless named');
    assert.deepEqual(
      { ...c, minSamples: 20, cooldownMs: 30_000, fastMinSamples: 40, flapWindowMs: 60_000, probeIntervalMs: 5_000 },
      DEFAULT_POLICY_CONFIG,
    );
  });

  test('the default latency budget is 1.5x healthyP95Ms, and none without healthyP95Ms', () => {
    assert.equal(latencyBudgetMs(DEFAULT_POLICY_CONFIG), null);
    assert.equal(latencyBudgetMs(parsePolicyConfig({ healthyP95Ms: 200 })), 300);
    assert.equal(latencyBudgetMs(parsePolicyConfig({ healthyP95Ms: 200, latencyBudgetFactor: 3 })), 600);
  });

  test('an explicit latencyBudgetMs overrides healthyP95Ms x factor', () => {
    assert.equal(latencyBudgetMs(parsePolicyConfig({ healthyP95Ms: 200, latencyBudgetMs: 1_000 })), 1_000);
    assert.equal(latencyBudgetMs(parsePolicyConfig({ latencyBudgetMs: 750 })), 750);
  });

  test('the default cooldown cap is 8x the 30 s cooldown, 1.2x that with jitter', () => {
    assert.equal(cooldownCapMs(DEFAULT_POLICY_CONFIG), 240_000);
    assert.equal(maxCooldownMs(DEFAULT_POLICY_CONFIG), 288_000);
  });
});

describe('accepted edge values', () => {
  const edges: Array<[string, Record<string, unknown>]> = [
    ['the smallest window with one bucket', { windowMs: 1_000, bucketMs: 1_000 }],
    ['the largest window', { windowMs: 3_600_000, bucketMs: 6_000 }],
    ['exactly 600 buckets', { windowMs: 60_000, bucketMs: 100 }],
    ['bucketMs equal to windowMs', { windowMs: 5_000, bucketMs: 5_000 }],
    ['minSamples 1', { minSamples: 1 }],
    ['failureRatio 1', { failureRatio: 1 }],
    ['latencyBudgetFactor 1', { latencyBudgetFactor: 1 }],
    ['no cooldown jitter', { cooldownJitter: 0 }],
    ['no cooldown growth and no cap headroom', { cooldownMultiplier: 1, cooldownMaxFactor: 1 }],
    ['100 concurrent probes', { maxConcurrentProbes: 100 }],
    ['1000 probes to close', { probesToClose: 1_000 }],
    ['no ramp', { rampMs: 0 }],
    ['rampFloor 1', { rampFloor: 1 }],
    ['permanentSurgeRatio 1', { permanentSurgeRatio: 1 }],
    ['explicit nulls for the nullable latency fields', { healthyP95Ms: null, latencyBudgetMs: null }],
  ];
  for (const [name, input] of edges) {
    test(`accepts ${name}`, () => {
      const c = parsePolicyConfig(input);
      for (const [k, v] of Object.entries(input)) assert.equal((c as Record<string, unknown>)[k], v, k);
    });
  }
});

describe('every field bound is enforced and reported with field and value', () => {
  const cases: Array<[field: string, value: unknown, extra?: Record<string, unknown>]> = [
    ['windowMs', 999, { bucketMs: 100 }],
    ['windowMs', 3_600_001, { bucketMs: 10_000 }],
    ['windowMs', 1_500.5, { bucketMs: 100 }],
    ['bucketMs', 99],
    ['bucketMs', 150.5],
    ['minSamples', 0],
    ['minSamples', 2.5],
    ['failureRatio', 0],
    ['failureRatio', 1.01],
    ['healthyP95Ms', 0],
    ['healthyP95Ms', -10],
    ['latencyBudgetFactor', 0.99],
    ['latencyBudgetMs', 0],
    ['latencyMinSamples', 0],
    ['latencyMinSamples', 1.5],
    ['permanentSurgeCount', 0],
    ['permanentSurgeRatio', 0],
    ['permanentSurgeRatio', 1.5],
    ['cooldownMs', 0],
    ['cooldownMs', 1.5],
    ['cooldownJitter', -0.1],
    ['cooldownJitter', 1],
    ['cooldownMultiplier', 0.5],
    ['cooldownMaxFactor', 0.9],
    ['cooldownDecayMs', 0],
    ['probeLeaseMs', 0],
    ['maxConcurrentProbes', 0],
    ['maxConcurrentProbes', 101],
    ['maxConcurrentProbes', 1.5],
    ['probesToClose', 0],
    ['probesToClose', 1_001],
    ['probeTrials', 0],
    ['slowCallMs', 0],
    ['slowCallRatio', 0],
    ['slowCallRatio', 1.5],
    ['probeTrials', 2, { probesToClose: 3 }],
    ['probeTrials', 2.5],
    ['probeBackoff', 0.5],
    ['probeBackoff', 17],
    ['rampMs', -1],
    ['rampMs', 0.5],
    ['rampFloor', 0],
    ['rampFloor', 1.1],
  ];
  for (const [field, value, extra] of cases) {
    test(`rejects ${field} = ${JSON.stringify(value)}`, () => {
      const err = rejected({ ...extra, [field]: value }, field, JSON.stringify(value));
      assert.equal(err.issues.filter((i) => i.startsWith(`${field}: `)).length, 1);
    });
  }
});

describe('wrong types', () => {
  test('a string where a number belongs names the field and shows the string', () => {
    rejected({ windowMs: '30s' }, 'windowMs', '"30s"');
  });
  test('null for a non-nullable field names the field and shows null', () => {
    rejected({ cooldownMs: null }, 'cooldownMs', 'null');
  });
  test('a boolean names the field and shows the boolean', () => {
    rejected({ failureRatio: true }, 'failureRatio', 'true');
  });
  test('a non-object configuration is reported at the root with its value', () => {
    rejected(5, '(root)', '5');
    rejected('fast', '(root)', '"fast"');
  });
  test('a long value is shown truncated to 80 characters', () => {
    const long = 'x'.repeat(200);
    const err = rejected({ windowMs: long }, 'windowMs', `${JSON.stringify(long).slice(0, 77)}...`);
    assert.ok(!err.message.includes(long));
  });
  test('NaN and Infinity are reported as themselves, not as null', () => {
    rejected({ windowMs: Number.NaN }, 'windowMs', 'NaN');
    rejected({ cooldownMs: Number.POSITIVE_INFINITY }, 'cooldownMs', 'Infinity');
  });
});

describe('unknown fields', () => {
  test('one unknown field is named', () => {
    assert.throws(
      () => parsePolicyConfig({ windowMS: 10_000 }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.issues.length === 1 &&
        e.issues[0] === '(root): unknown field "windowMS"' &&
        e.message.includes('"windowMS"'),
    );
  });
  test('several unknown fields are all named in one issue', () => {
    assert.throws(
      () => parsePolicyConfig({ foo: 1, bar: 2 }),
      (e: unknown) => e instanceof ConfigError && e.issues.some((i) => i === '(root): unknown fields "foo", "bar"'),
    );
  });
  test('an unknown field is reported alongside a bad known one', () => {
    assert.throws(
      () => parsePolicyConfig({ typo: 1, minSamples: 0 }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.issues.some((i) => i.includes('"typo"')) &&
        e.issues.some((i) => i.startsWith('minSamples: ') && i.includes('(got 0)')),
    );
  });
});

describe('window shape', () => {
  test('without bucketMs, the window gets 120 buckets of at least 250 ms', () => {
    assert.equal(parsePolicyConfig({ windowMs: 3_600_000 }).bucketMs, 30_000);
    assert.equal(parsePolicyConfig({ windowMs: 10_000 }).bucketMs, 250);
  });
  test('a fast window longer than the window is rejected on fastWindowMs', () => {
    const err = rejected({ windowMs: 5_000, fastWindowMs: 6_000 }, 'fastWindowMs', '6000');
    assert.ok(
      err.issues.some((i) => i.includes('must be <= windowMs (5000)')),
      err.message,
    );
  });
  test('fastMinSamples below minSamples is rejected', () => {
    rejected({ minSamples: 50, fastMinSamples: 40 }, 'fastMinSamples', '40');
  });
  test('the fast window defaults to one second and 0 turns it off', () => {
    assert.equal(parsePolicyConfig({}).fastWindowMs, 1_000);
    assert.equal(parsePolicyConfig({ fastWindowMs: 0 }).fastWindowMs, 0);
  });
  test('bucketMs larger than windowMs is rejected on bucketMs, naming windowMs and the value', () => {
    const err = rejected({ windowMs: 5_000, bucketMs: 6_000 }, 'bucketMs', '6000');
    assert.ok(
      err.issues.some((i) => i.includes('must be <= windowMs (5000)')),
      err.message,
    );
  });
  test('bucketMs larger than the default 30 s window is rejected', () => {
    rejected({ bucketMs: 40_000 }, 'bucketMs', '40000');
  });
  test('601 buckets are rejected, naming the smallest bucketMs that fits', () => {
    const err = rejected({ windowMs: 60_100, bucketMs: 100 }, 'bucketMs', '100');
    assert.ok(
      err.issues.some((i) => i.includes('(101)') && i.includes('600 buckets')),
      err.message,
    );
  });
  test('an hour of 100 ms buckets (36000 buckets) is rejected', () => {
    rejected({ windowMs: 3_600_000, bucketMs: 100 }, 'bucketMs', '100');
  });
  test('1 s buckets with a 10-minute-and-a-second window are rejected', () => {
    rejected({ windowMs: 601_000, bucketMs: 1_000 }, 'bucketMs', '1000');
    assert.doesNotThrow(() => parsePolicyConfig({ windowMs: 600_000 }));
  });
});

describe('bounds', () => {
  test('configure bounds refused: each bounded setting one past its bound is refused, naming the field, the bound and the value', () => {
    for (const [field, { max, label }] of Object.entries(POLICY_BOUNDS)) {
      const over = Number.isInteger(max) ? max + 1 : max * 1.01;
      assert.throws(
        () => checkPolicyBounds({ [field]: over }, 'breaker configure'),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.issues.length === 1 &&
          err.issues[0] === `${field}: must be at most ${max} (${label}) (got ${over})`,
        field,
      );
      // At the bound itself: accepted.
      assert.doesNotThrow(() => checkPolicyBounds({ [field]: max }), field);
    }
  });

  test('a cooldown of 1e15 ms is refused by the parse every new configuration goes through', () => {
    const err = rejected({ cooldownMs: 1e15 }, 'cooldownMs', '1000000000000000');
    assert.match(err.message, /must be at most 2592000000 \(30 days\)/);
    rejected({ cooldownMultiplier: 1e9 }, 'cooldownMultiplier', '1000000000');
    rejected({ cooldownMaxFactor: 1e9 }, 'cooldownMaxFactor', '1000000000');
    rejected({ probeLeaseMs: 1e12 }, 'probeLeaseMs', '1000000000000');
    rejected({ minSamples: 1e12, fastMinSamples: 1e12 }, 'minSamples', '1000000000000');
  });

  test('the longest grown cooldown and trial wait are bounded too (x cooldownMaxFactor at most 30 days)', () => {
    rejected({ cooldownMs: 5 * 86_400_000 }, 'cooldownMs', String(5 * 86_400_000));
    rejected(
      { cooldownMs: 60_000, cooldownMaxFactor: 1_000, probeIntervalMs: 3_600_000 },
      'probeIntervalMs',
      '3600000',
    );
    const c = parsePolicyConfig({ cooldownMs: MAX_POLICY_DURATION_MS, cooldownMaxFactor: 1 });
    assert.equal(cooldownCapMs(c), MAX_POLICY_DURATION_MS);
  });
});
