import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BreakerStateName, TransitionReason, TransitionRecord } from '../../src/breaker';
import { openReport } from '../../src/client/open-intervals';
import { formatOpenReport } from '../../src/cli/breaker/format';

// An arbitrary instant, far from today.
const T = Date.UTC(2001, 2, 4, 22, 0, 0);
const MIN = 60_000;
const tr = (at: number, from: BreakerStateName, to: BreakerStateName, reason: TransitionReason): TransitionRecord => ({
  at,
  from,
  to,
  reason,
  detail: '',
});
/** The entity keeps its log most recent first. */
const log = (...ts: TransitionRecord[]) => ts.sort((a, b) => b.at - a.at);

test('an outage with a failed probe: one interval from the trip to the close, with the time fully open apart from half-open probing', () => {
  const r = openReport(
    log(
      tr(T + 10 * MIN, 'closed', 'open', 'failure-ratio'),
      tr(T + 11 * MIN, 'open', 'half-open', 'cooldown-elapsed'),
      tr(T + 11 * MIN + 1_000, 'half-open', 'open', 'probe-failed'),
      tr(T + 12 * MIN, 'open', 'half-open', 'cooldown-elapsed'),
      tr(T + 12 * MIN + 2_000, 'half-open', 'closed', 'probes-succeeded'),
    ),
    T,
    T + 60 * MIN,
  );
  assert.equal(r.intervals.length, 1);
  const [i] = r.intervals;
  assert.deepEqual(
    { from: i!.from, to: i!.to, reason: i!.reason, ms: i!.ms, openMs: i!.openMs, reopens: i!.reopens },
    {
      from: T + 10 * MIN,
      to: T + 12 * MIN + 2_000,
      reason: 'failure-ratio',
      ms: 2 * MIN + 2_000,
      openMs: MIN + (MIN - 1_000),
      reopens: 1,
    },
  );
  assert.equal(r.openMs, 2 * MIN - 1_000);
  assert.equal(r.notClosedMs, 2 * MIN + 2_000);
  // The log starts inside the period: said, unless the caller knows it is the whole log.
  assert.equal(r.truncated, true);
  assert.equal(openReport(log(tr(T + MIN, 'closed', 'open', 'latency')), T, T + 2 * MIN, true).truncated, false);
});

test('the period cuts intervals: one open before it started (its reason from the log), one still open now', () => {
  const r = openReport(
    log(
      tr(T - 30 * MIN, 'closed', 'open', 'latency'),
      tr(T - 20 * MIN, 'open', 'half-open', 'cooldown-elapsed'),
      tr(T - 20 * MIN + 500, 'half-open', 'open', 'probe-failed'),
      tr(T + 5 * MIN, 'open', 'closed', 'reset'),
      tr(T + 50 * MIN, 'closed', 'forced-open', 'forced-open'),
    ),
    T,
    T + 60 * MIN,
  );
  assert.deepEqual(
    r.intervals.map((i) => [i.from - T, i.to === null ? null : i.to - T, i.reason, i.ms, i.openMs]),
    [
      [0, 5 * MIN, 'latency', 5 * MIN, 5 * MIN],
      [50 * MIN, null, 'forced-open', 10 * MIN, 10 * MIN],
    ],
  );
  assert.equal(r.openMs, 15 * MIN);
  const text = formatOpenReport(r, 60 * MIN);
  assert.match(
    text,
    /^over the last 1h 00m \(since 2001-03-04T22:00:00\.000Z\): open 15m 00s, not closed 15m 00s .* in 2 intervals$/m,
  );
  assert.match(
    text,
    /^ {2}2001-03-04T22:50:00\.000Z -> now \(still not closed\) {2}10m 00s {2}forced-open \(open 10m 00s\)$/m,
  );
});

test('a closed period, an empty log, and a log that starts inside the period', () => {
  assert.deepEqual(openReport([], T, T + MIN).intervals, []);
  const quiet = openReport(
    log(
      tr(T - 90 * MIN, 'closed', 'open', 'failure-ratio'),
      tr(T - 80 * MIN, 'half-open', 'closed', 'probes-succeeded'),
    ),
    T,
    T + MIN,
  );
  assert.deepEqual([quiet.intervals.length, quiet.openMs, quiet.truncated], [0, 0, false]);
  // The log starts after the period does: the state before its first transition is that transition's `from`.
  const late = openReport(
    log(
      tr(T + 10 * MIN, 'open', 'half-open', 'cooldown-elapsed'),
      tr(T + 10 * MIN + 300, 'half-open', 'closed', 'probes-succeeded'),
    ),
    T,
    T + 60 * MIN,
  );
  assert.equal(late.truncated, true);
  assert.deepEqual(
    late.intervals.map((i) => [i.from, i.reason, i.openMs]),
    [[T, null, 10 * MIN]],
  );
  assert.match(formatOpenReport(late, 60 * MIN), /the log starts at 2001-03-04T22:10:00\.000Z/);
});
