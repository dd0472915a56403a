import assert from 'node:assert/strict';
import { test } from 'node:test';
import { peakConcurrent } from '../../bench/outage/metrics';
import { peakDump, peakMembers } from '../../bench/outage/peak-dump';
import type { AttemptRecord } from '../../bench/outage/types';
import { failedAttempt, O, quietServer } from '../helpers/outage-recording';

const attempt = (
  worker: number,
  from: number,
  to: number,
  probe: boolean,
  state = probe ? 'half-open' : 'closed',
): AttemptRecord => failedAttempt(worker, from, to, probe, { decidedAt: from, state });

test("bench:outage's peak dump names the intervals overlapping at the peak, as many as peakConcurrent counts", () => {
  const items: Array<[number, number]> = [
    [0, 10],
    [5, 20],
    [10, 30], // starts as the first ends: no overlap with it
    [12, 14],
    [40, 50],
  ];
  const p = peakMembers(items, (i) => i, [[0, 100]]);
  assert.equal(p!.members.length, peakConcurrent(items, [[0, 100]]));
  assert.deepEqual(
    p!.members.sort((a, b) => a[0] - b[0]),
    [
      [5, 20],
      [10, 30],
      [12, 14],
    ],
  );
  assert.equal(p!.at, 12);
  // Clipped to the windows: outside them nothing counts.
  assert.equal(peakMembers(items, (i) => i, [[35, 60]])!.members.length, 1);
  assert.equal(
    peakMembers(items, (i) => i, [[31, 39]]),
    null,
  );
});

test('the dump prints each peak above one with its workers, probe flags, decisions and the entity transitions around it', () => {
  const server = quietServer();
  const lines = peakDump({
    attempts: [attempt(1, 20_000, 20_050, true), attempt(2, 20_010, 20_020, false)],
    server,
    transitions: [
      {
        at: O + 19_900,
        from: 'open',
        to: 'half-open',
        reason: 'cooldown-elapsed',
        detail: 'cooldown of 1000 ms elapsed',
      },
      {
        at: O + 20_300,
        from: 'half-open',
        to: 'open',
        reason: 'probe-failed',
        detail: 'probe 3 by sim-1 failed: transient',
      },
    ],
    halfOpenWindow: [O + 3_000, O + 40_500],
    runs: [{ startedAt: O + 20_005, firstTaskDoneAt: O + 20_100 }],
  });
  const text = lines.join('\n');
  assert.match(text, /client, fleet half-open window: 2 at \+20\.010/);
  assert.match(text, /client worker 1 PROBE \+20\.000 \.\. \+20\.050 status 503 decided \+20\.000 as half-open/);
  assert.match(text, /client worker 2 ordinary \+20\.010 \.\. \+20\.020 status 503 decided \+20\.010 as closed/);
  assert.match(text, /entity \+19\.900 open -> half-open/);
  assert.match(text, /entity run started \+20\.005 \(continue-as-new\), first task done \+20\.100/);
  assert.match(text, /server, fleet half-open window: none/);
});
