import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import type { Client } from '@temporalio/client';
import type { EntityLink } from '../../src/activities/guard/entity-link';
import { MAX_FAILURE_HOLD_MS, ReportSender } from '../../src/activities/guard/report-sender';
import { FailureFlushes, FleetSizes, ReportSchedule } from '../../src/activities/guard/report-spacing';
import { resolveGuardOptions, type GuardStats } from '../../src/activities/guard/types';
import { CLOSED_VIEW, type ViewCache } from '../../src/activities/guard/view-cache';
import type { OutcomeReport } from '../../src/messages/breaker';

// Which failing workers of a fleet send their failures at once (report-spacing.ts's FailureFlushes), seen
// through the sender: the clock and timers are mocked, the draw is injected, nothing waits on a real clock.

/** An arbitrary instant far from today. */
const T2001 = Date.UTC(2001, 5, 7);

function sender(reporters: number, draw: { value: number }) {
  const sent: OutcomeReport[] = [];
  const client = {
    workflow: {
      signalWithStart: (_wf: unknown, o: { signalArgs: [OutcomeReport] }) => {
        sent.push(o.signalArgs[0]);
        return Promise.resolve();
      },
    },
  } as unknown as Client;
  const o = resolveGuardOptions({ client, taskQueue: 'q', reporter: 'w1', logger: { warn: () => {} } });
  const link = {
    rpc: <T>(fn: () => Promise<T>) => fn(),
    handle: () => ({
      signal: (_def: unknown, r: OutcomeReport) => {
        sent.push(r);
        return Promise.resolve();
      },
    }),
    losses: { delivered: () => {} },
    reportDropped: () => {},
  } as unknown as EntityLink;
  const views = { last: () => null, invalidate: () => {} } as unknown as ViewCache;
  const fleet = new FleetSizes();
  fleet.saw('k', { ...CLOSED_VIEW, reporters }, T2001);
  const s = new ReportSender(
    o,
    link,
    views,
    { reportsSent: 0 } as GuardStats,
    () => 1,
    () => undefined,
    new ReportSchedule(o, fleet, () => 0.5),
    new FailureFlushes(8, () => draw.value),
  );
  return { s, sent };
}

test('a worker of a large fleet not drawn keeps its failures for its next report; drawn, it sends them all at once', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: T2001 });
  try {
    const draw = { value: 0.9 }; // 0.9 >= 8 / 256: not a flusher this second
    const { s, sent } = sender(256, draw);
    // The key's first report (it is due at once), then the next one is 32 s out.
    s.add('k', { kind: 'success', latencyMs: 20 });
    await s.flushDue();
    assert.equal(sent.length, 1);
    for (let i = 0; i < 3; i++) s.add('k', { kind: 'transient', latencyMs: 5 });
    assert.equal(s.alarm('k'), null);
    assert.equal(s.failing('k'), true); // its view is kept fresher all the same
    mock.timers.tick(200);
    await Promise.resolve();
    assert.equal(sent.length, 1);
    // A later second draws it: this failure and the three kept go together, after the gathering delay.
    mock.timers.tick(1_000);
    draw.value = 0.01;
    s.add('k', { kind: 'transient', latencyMs: 5 });
    const alarm = s.alarm('k');
    assert.ok(alarm);
    mock.timers.tick(50);
    await alarm;
    assert.equal(sent.length, 2);
    assert.equal(sent[1]!.counts.transient, 4);
  } finally {
    mock.timers.reset();
  }
});

test('a worker of a fleet of failureFlushers or fewer sends its failures at once, as before', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: T2001 });
  try {
    const { s, sent } = sender(8, { value: 0.999 });
    for (let i = 0; i < 2; i++) s.add('k', { kind: 'transient', latencyMs: 5 });
    const alarm = s.alarm('k');
    assert.ok(alarm);
    mock.timers.tick(50);
    await alarm;
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.counts.transient, 2);
  } finally {
    mock.timers.reset();
  }
});

test('a worker never drawn sends its failures once they have waited MAX_FAILURE_HOLD_MS (a few workers left of a fleet once large)', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: T2001 });
  try {
    const { s, sent } = sender(1_024, { value: 0.999 }); // never a flusher
    s.add('k', { kind: 'success', latencyMs: 20 });
    await s.flushDue();
    assert.equal(sent.length, 1);
    // One failing call a second: held while under the cap, sent with the first failure past it.
    let waited = 0;
    for (; waited < MAX_FAILURE_HOLD_MS; waited += 1_000) {
      s.add('k', { kind: 'transient', latencyMs: 5 });
      assert.equal(s.alarm('k'), null, `held at ${waited} ms`);
      mock.timers.tick(1_000);
    }
    s.add('k', { kind: 'transient', latencyMs: 5 });
    const alarm = s.alarm('k');
    assert.ok(alarm, `sent once held ${waited} ms`);
    mock.timers.tick(50);
    await alarm;
    assert.equal(sent.length, 2);
    assert.equal(sent[1]!.counts.transient, MAX_FAILURE_HOLD_MS / 1_000 + 1);
    // The hold starts over with the next failure.
    s.add('k', { kind: 'transient', latencyMs: 5 });
    assert.equal(s.alarm('k'), null);
  } finally {
    mock.timers.reset();
  }
});
