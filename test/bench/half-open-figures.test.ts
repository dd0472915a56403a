import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computeFigures } from '../../bench/outage/metrics';
import { ModeRecorder } from '../../bench/outage/recorder';
import type { AttemptRecord, Scenario } from '../../bench/outage/types';
import type { TransitionRecord } from '../../src/breaker';
import { failedAttempt, O, quietServer } from '../helpers/outage-recording';

const scenario: Scenario = {
  workers: 2,
  healthyMs: 5_000,
  outageMs: 40_000,
  recoveryMs: 15_000,
  outageKind: '503',
  retryAfterSec: null,
  tileLatencyMs: 150,
  retry: { attempts: 3, baseMs: 100, capMs: 2_000 },
  probeAttempts: 1,
  rampMs: null,
  breaker: { windowMs: 30_000, minSamples: 20, failureRatio: 0.5, cooldownMs: 1_000 },
};
const server = quietServer();
const attempt = (
  worker: number,
  from: number,
  to: number,
  probe: boolean,
  decidedAt: number,
  failOpen = false,
): AttemptRecord =>
  failedAttempt(worker, from, to, probe, { decidedAt, state: probe ? 'half-open' : 'closed', failOpen });
const transitions: TransitionRecord[] = [
  { at: O + 2_000, from: 'closed', to: 'open', reason: 'failure-ratio', detail: '' },
  { at: O + 3_000, from: 'open', to: 'half-open', reason: 'cooldown-elapsed', detail: '' },
  { at: O + 3_500, from: 'half-open', to: 'open', reason: 'probe-failed', detail: '' },
  { at: O + 20_000, from: 'open', to: 'half-open', reason: 'cooldown-elapsed', detail: '' },
  { at: O + 20_400, from: 'half-open', to: 'open', reason: 'probe-failed', detail: '' },
];

function figures(attempts: AttemptRecord[]) {
  const recorder = new ModeRecorder('shared');
  recorder.attempts.push(...attempts);
  // Worker 0 knows of the trip at +2.9 s, worker 1 at +3.2 s.
  recorder.view(0, 'refused', O + 2_900);
  recorder.view(1, 'refused', O + 3_200);
  return computeFigures({ mode: 'shared', scenario, recorder, server, wallMs: 60_000, entityTransitions: transitions });
}

test("bench:outage counts the ordinary calls started in the entity's half-open intervals, those a guard let through after the fleet knew of the trip, and those failing open", () => {
  const f = figures([
    // A retry of a call decided before anyone knew of the trip, started in the first half-open interval.
    attempt(1, 3_050, 3_060, false, 2_800),
    attempt(0, 3_100, 3_120, true, 3_100),
    // Calls decided 'closed' 17 s after the trip (what a guard reading a continued run without a memo did).
    attempt(0, 20_100, 20_110, false, 20_100),
    attempt(1, 20_105, 20_112, false, 20_105),
    // A guard that could not reach Temporal failed open: counted apart.
    attempt(1, 20_200, 20_210, false, 20_200, true),
    // Outside every half-open interval: not counted.
    attempt(0, 10_000, 10_010, false, 10_000),
  ]);
  assert.deepEqual(f.ordinaryInEntityHalfOpen, { started: 4, decidedAfterTrip: 2, failOpenAfterTrip: 1 });
  // The peak counts both kinds: what was in flight while half-open, whoever decided it.
  assert.equal(f.peakInFlightEntityHalfOpen, 2);
});

test('a fleet that sends only probes while half-open counts no ordinary calls there', () => {
  const f = figures([attempt(0, 3_100, 3_120, true, 3_100), attempt(1, 20_100, 20_150, true, 20_100)]);
  assert.deepEqual(f.ordinaryInEntityHalfOpen, { started: 0, decidedAfterTrip: 0, failOpenAfterTrip: 0 });
  assert.equal(f.peakInFlightEntityHalfOpen, 1);
});
