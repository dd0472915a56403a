import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_POLICY_CONFIG, type TransitionRecord } from '../../src/breaker';
import { carriedFromStatus } from '../../src/client/upgrade-from-0x';
import type { BreakerStatus } from '../../src/messages/breaker';

const status = (over: Partial<BreakerStatus> = {}): BreakerStatus =>
  ({
    key: 'https://tiles.example.test',
    view: {
      state: 'open',
      mode: 'auto',
      phase: 'open',
      cooldownUntil: 5_000,
      forcedUntil: null,
      rampStartedAt: null,
      rampMs: 10_000,
      rampFloor: 0.1,
      probesOutstanding: 1,
      maxConcurrentProbes: 1,
      generation: 7,
    },
    openedAt: 4_000,
    consecutiveOpens: 2,
    probes: [{ generation: 7, holder: 'w1', grantedAt: 4_500, leaseUntil: 9_000 }],
    probeSuccesses: 0,
    config: { ...DEFAULT_POLICY_CONFIG, quorum: 1 },
    probe: null,
    lastReportAt: 4_100,
    counters: { reports: 9, probeRequests: 1, selfProbes: 0, ignoredResults: 0, continuedAsNew: 0 },
    searchAttributes: false,
    ...over,
  }) as BreakerStatus;

const t = (at: number, from: string, to: string, reason: string): TransitionRecord =>
  ({ at, from, to, reason, detail: '' }) as TransitionRecord;

test("a 0.x entity's status and log carry its phase, cooldown, token, config and log into a 1.x run", () => {
  const log = [t(4_000, 'closed', 'open', 'failure-ratio'), t(3_000, 'half-open', 'closed', 'probes-succeeded')];
  const c = carriedFromStatus(status(), log);
  assert.equal(c.policy.version, 2);
  assert.deepEqual([c.policy.phase, c.policy.cooldownUntil, c.policy.openedAt], ['open', 5_000, 4_000]);
  assert.equal(c.policy.lastGeneration, 7);
  assert.deepEqual(
    c.policy.probes.map((p) => [p.generation, p.holder]),
    [[7, 'w1']],
  );
  assert.equal(c.policy.config.quorum, 1, 'the rules it ran on');
  assert.equal(c.policy.closedAt, 3_000);
  assert.deepEqual(c.log, log);
  assert.equal(c.lastTransitionAt, 4_000);
  assert.equal(c.operatorSet, undefined);
});

test('its last close is a move into closed, not a configure or a declined trip logged closed to closed', () => {
  const log = [
    t(6_000, 'closed', 'closed', 'configured'),
    t(5_000, 'closed', 'closed', 'quorum-not-met'),
    t(3_000, 'half-open', 'closed', 'probes-succeeded'),
  ];
  const c = carriedFromStatus(status({ view: { ...status().view, state: 'closed', phase: 'closed' } }), log);
  assert.equal(c.policy.closedAt, 3_000);
  assert.equal(c.operatorSet, true, 'a configure on record keeps the moved entity from ending idle');
});
