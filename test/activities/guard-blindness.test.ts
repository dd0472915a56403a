import assert from 'node:assert/strict';
import { test } from 'node:test';
import { msNumberToTs } from '@temporalio/common/lib/time';
import type { BreakerView } from '../../src/breaker';
import { isUnreachable, Reachability } from '../../src/activities/guard/reachability';
import { ReportLoss } from '../../src/activities/guard/report-loss';
import type { GuardStats } from '../../src/activities/guard/types';
import { CLOSED_VIEW } from '../../src/activities/guard/view-cache';
import { pendingTaskOf, WedgeWatch, type WedgeEvidence } from '../../src/activities/guard/wedge-watch';
import { NO_METRICS } from '../../src/activities/metrics/worker-metrics';

// The guard's parts that tell when the breaker cannot protect, on a clock of the test's own (epoch ms).
const T0 = 1_800_000_000_000;

function watch(graceMs = 10_000) {
  const events: string[] = [];
  const w = new WedgeWatch(graceMs, {
    wedged: (key: string, e: WedgeEvidence) => events.push(`wedged ${key} ${e.kind}`),
    moving: (key: string, ms: number) => events.push(`moving ${key} after ${ms}`),
  });
  return { w, events };
}

test('wedge watch: an open view past its cooldown by more than the grace is wedged, once per episode; moving again ends it', () => {
  const { w, events } = watch();
  const open: BreakerView = { ...CLOSED_VIEW, state: 'open', cooldownUntil: T0 };
  assert.equal(w.wedged('k', open, null, T0 - 1_000), false, 'cooling down');
  assert.equal(w.wedged('k', open, null, T0 + 5_000), false, 'past the cooldown, within the grace');
  assert.equal(w.wedged('k', open, null, T0 + 10_001), true);
  assert.equal(w.wedged('k', open, null, T0 + 12_000), true);
  assert.equal(w.wedged('k', { ...CLOSED_VIEW, state: 'half-open' }, null, T0 + 13_000), false, 'the entity moved on');
  assert.deepEqual(events, ['wedged k timer-overdue', 'moving k after 2999']);
});

test('wedge watch: a timed force-open past its end is overdue; an open one without an end is not', () => {
  const { w } = watch(1_000);
  assert.equal(w.wedged('a', { ...CLOSED_VIEW, state: 'forced-open', forcedUntil: T0 }, null, T0 + 1_001), true);
  assert.equal(w.wedged('b', { ...CLOSED_VIEW, state: 'forced-open', forcedUntil: null }, null, T0 + 3_600_000), false);
});

test('wedge watch: a workflow task left waiting past the grace is wedged, whatever the view (none yet, closed)', () => {
  const { w } = watch();
  const task = { scheduledAt: T0, attempt: 1 };
  assert.equal(w.wedged('k', null, task, T0 + 9_000), false);
  assert.equal(w.wedged('k', null, task, T0 + 10_500), true);
  assert.equal(
    w.wedged('k', CLOSED_VIEW, { scheduledAt: T0 + 10_400, attempt: 1 }, T0 + 10_600),
    false,
    'a new task, just scheduled: busy, not wedged',
  );
});

test('wedge watch: a task retried (attempt 2 and more) for longer than the grace, by the watcher clock, is wedged', () => {
  const { w } = watch();
  assert.equal(w.wedged('k', CLOSED_VIEW, { scheduledAt: T0, attempt: 2 }, T0), false);
  assert.equal(w.wedged('k', CLOSED_VIEW, { scheduledAt: T0 + 8_000, attempt: 5 }, T0 + 8_100), false);
  assert.equal(
    w.wedged('k', CLOSED_VIEW, { scheduledAt: T0 + 10_050, attempt: 6 }, T0 + 10_100),
    true,
    'retried since T0',
  );
  assert.equal(w.wedged('k', CLOSED_VIEW, null, T0 + 11_000), false, 'done');
});

test('wedge watch: grace 0 turns it off; a bad grace is refused naming the option', () => {
  assert.equal(
    watch(0).w.wedged('k', { ...CLOSED_VIEW, state: 'open', cooldownUntil: T0 }, null, T0 + 3_600_000),
    false,
  );
  assert.throws(() => watch(-1), /wedgeGraceMs must be a number of ms >= 0 \(got -1\)/);
});

test("pendingTaskOf reads Describe's pending workflow task: the first scheduled time, else the scheduled time", () => {
  assert.equal(pendingTaskOf({}), null);
  assert.deepEqual(pendingTaskOf({ pendingWorkflowTask: { scheduledTime: msNumberToTs(T0 + 5), attempt: 3 } }), {
    scheduledAt: T0 + 5,
    attempt: 3,
  });
  assert.deepEqual(
    pendingTaskOf({
      pendingWorkflowTask: {
        originalScheduledTime: msNumberToTs(T0),
        scheduledTime: msNumberToTs(T0 + 9_000),
        attempt: 1,
      },
    }),
    {
      scheduledAt: T0,
      attempt: 1,
    },
  );
});

test('reachability: an unreachable answer makes the process fail open at once, with re-reads backing off 1, 2, 4, 5, 5 s; an answer ends it', () => {
  const r = new Reachability(5_000);
  const unavailable = Object.assign(new Error('Failed to describe workflow'), {
    cause: Object.assign(new Error('14 UNAVAILABLE'), { code: 14, details: '', metadata: {} }),
  });
  assert.deepEqual(
    [1, 2, 3, 4, 5].map(() => r.failed(unavailable)),
    [1_000, 2_000, 4_000, 5_000, 5_000],
  );
  assert.equal(r.down, true);
  r.answered();
  assert.equal(r.down, false);
  // A refusal is an answer: that key waits 1 s, the process is not down.
  assert.equal(r.failed(Object.assign(new Error('denied'), { code: 7 })), 1_000);
  assert.equal(r.down, false);
  assert.equal(isUnreachable(new Error('Channel has been shut down')), true, 'no gRPC status: no answer');
  assert.equal(isUnreachable(Object.assign(new Error('deadline'), { code: 4 })), true);
  assert.throws(() => new Reachability(0), /unreachableRecheckMs must be a number of ms > 0 \(got 0\)/);
});

test('report loss: 3 reports dropped in a row make the calls let through count as failing open (reports-dropped), until one is delivered', () => {
  const stats = { failOpen: 0, blindFailOpen: 0, reportErrors: 0 } as GuardStats;
  const warnings: string[] = [];
  const loss = new ReportLoss(3, stats, NO_METRICS, { warn: (m) => warnings.push(m) });
  const proceed = { kind: 'proceed', key: 'k', state: 'closed', allowance: 1, failOpen: false } as const;
  loss.dropped('k');
  loss.dropped('k');
  assert.equal(loss.mark(proceed), proceed, 'two in a row: not yet');
  loss.dropped('k');
  assert.deepEqual(loss.mark(proceed), { ...proceed, failOpen: true, failOpenReason: 'reports-dropped' });
  const refused = { kind: 'refused', key: 'k', state: 'open', retryAfterMs: 1_000, reason: 'breaker open' } as const;
  assert.equal(loss.mark(refused), refused, 'the view still refuses');
  assert.equal(loss.mark({ ...proceed, key: 'other' }).kind, 'proceed');
  loss.delivered('k');
  assert.equal(loss.mark(proceed), proceed, 'heard again');
  assert.deepEqual([stats.reportErrors, stats.failOpen, stats.blindFailOpen, warnings.length], [3, 1, 1, 2]);
  assert.throws(
    () => new ReportLoss(0, stats, NO_METRICS, { warn: () => {} }),
    /blindAfterDrops must be an integer >= 1 \(got 0\)/,
  );
});
