import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOSED_VIEW } from '../../src/activities/guard/view-cache';
import { ReportBuffer } from '../../src/activities/guard/report-buffer';
import {
  countedForMs,
  FailureFlushes,
  FLEET_MEMORY_MS,
  FLUSH_DRAW_MS,
  FleetSizes,
  GUESS_SETTLE_MS,
  JITTER,
  jittered,
  ReportSchedule,
  reportEveryMs,
  seededDraw,
} from '../../src/activities/guard/report-spacing';

const o = { reportIntervalMs: 1_000, targetSignalsPerSecond: 8, maxReportIntervalMs: 60_000 };
/** An arbitrary instant far from today. */
const T2001 = Date.UTC(2001, 5, 7);

test('the interval grows with the fleet so the fleet sends about targetSignalsPerSecond, within its bounds', () => {
  assert.equal(reportEveryMs(1, o), 1_000);
  assert.equal(reportEveryMs(4, o), 1_000); // 0.5 s: never below reportIntervalMs
  assert.equal(reportEveryMs(64, o), 8_000);
  assert.equal(reportEveryMs(256, o), 32_000);
  assert.equal(reportEveryMs(4_096, o), 60_000); // at most maxReportIntervalMs
  assert.equal(reportEveryMs(256, { ...o, targetSignalsPerSecond: 0 }), 1_000); // 0: spacing off
  for (const n of [8, 64, 256]) assert.ok(n / (reportEveryMs(n, o) / 1_000) <= o.targetSignalsPerSecond);
});

test('jitter keeps each interval within +-JITTER of the spacing', () => {
  assert.equal(jittered(10_000, 0), 10_000 * (1 - JITTER));
  assert.ok(jittered(10_000, 0.999_999) < 10_000 * (1 + JITTER));
  assert.equal(jittered(10_000, 0.5), 10_000);
});

test('the fleet size is the largest count the entity published lately; an entity with no count means no spacing', () => {
  const f = new FleetSizes();
  assert.equal(f.count('k'), 1);
  f.saw('k', { ...CLOSED_VIEW, reporters: 256 }, T2001);
  f.saw('k', { ...CLOSED_VIEW, reporters: 64 }, T2001 + 1_000); // a dip (a continue-as-new) is not believed at once
  assert.equal(f.count('k'), 256);
  f.saw('k', { ...CLOSED_VIEW, reporters: 64 }, T2001 + FLEET_MEMORY_MS + 1);
  assert.equal(f.count('k'), 64);
  f.saw('k', undefined, T2001 + FLEET_MEMORY_MS + 2); // unreachable: keep what was known
  assert.equal(f.count('k'), 64);
  f.saw('k', CLOSED_VIEW, T2001 + FLEET_MEMORY_MS + 3); // an entity from before the count
  assert.equal(f.count('k'), 1);
});

test('a key is due when never reported, then again one jittered interval after its last report', () => {
  const f = new FleetSizes();
  f.saw('k', { ...CLOSED_VIEW, reporters: 64 }, T2001);
  const s = new ReportSchedule(o, f, () => 0.5);
  assert.equal(s.isDue('k', T2001), true);
  assert.equal(s.everyMs('k'), 8_000);
  s.reported('k', T2001);
  // Asked once a second: due within half a second of its time.
  assert.equal(s.isDue('k', T2001 + 7_499), false);
  assert.equal(s.isDue('k', T2001 + 7_500), true);
  // At the plain interval every tick sends, however late in its tick the last report went.
  const plain = new ReportSchedule(o, new FleetSizes(), () => 0.999);
  plain.reported('k', T2001 + 30);
  assert.equal(plain.isDue('k', T2001 + 1_000), true);
});

test('a fleet that shrank is not waited out: the next report goes by the new, shorter interval', () => {
  const f = new FleetSizes();
  f.saw('k', { ...CLOSED_VIEW, reporters: 256 }, T2001);
  const s = new ReportSchedule(o, f, () => 0.5);
  s.reported('k', T2001); // due at +32 s
  f.saw('k', { ...CLOSED_VIEW, reporters: 8 }, T2001 + FLEET_MEMORY_MS + 1);
  assert.equal(s.isDue('k', T2001 + FLEET_MEMORY_MS + 1), true);
  const g = new FleetSizes();
  g.saw('k', { ...CLOSED_VIEW, reporters: 256 }, T2001);
  const t = new ReportSchedule(o, g, () => 0.5);
  t.reported('k', T2001);
  g.saw('k', { ...CLOSED_VIEW, reporters: 16 }, T2001 + FLEET_MEMORY_MS + 1); // 2 s now
  assert.equal(t.isDue('k', T2001 + 2 * (1 + JITTER) * 1_000 - 501), false);
  assert.equal(t.isDue('k', T2001 + 2 * (1 + JITTER) * 1_000 - 500), true);
});

test('a process stays counted by the entity for two of its intervals, with a margin before that', () => {
  assert.equal(countedForMs(1_000), 3_000); // the entity's plain 5 s TTL, 2 s early
  assert.equal(countedForMs(32_000), 63_000); // the entity keeps it 65 s
});

test('a buffer held past the recent span keeps its older outcomes apart, with when they happened', () => {
  const b = new ReportBuffer(1_000);
  for (let t = 0; t < 20_000; t += 100) b.add('success', 50, undefined, T2001 + t);
  b.add('transient', 5, undefined, T2001 + 23_500);
  const r = b.take('w', T2001 + 24_000);
  assert.deepEqual(r.counts, { success: 200, transient: 1 });
  assert.deepEqual(r.earlier?.counts, { success: 200 });
  assert.equal(r.earlier?.fromAgoMs, 24_000);
  assert.equal(r.earlier?.toAgoMs, 24_000 - 19_900);
  assert.equal(
    r.earlier?.latency?.reduce((a, n) => a + n, 0),
    200,
  );
  // Taken: the next report starts afresh.
  b.add('success', 50, undefined, T2001 + 24_100);
  const next = b.take('w', T2001 + 24_200);
  assert.deepEqual(next.counts, { success: 1 });
  assert.equal(next.earlier, undefined);
});

test('the failure share that calls for a report at once is read over the recent outcomes, not 30 s of successes', () => {
  const b = new ReportBuffer(1_000);
  for (let t = 0; t < 30_000; t += 100) b.add('success', 50, undefined, T2001 + t);
  for (let i = 0; i < 3; i++) b.add('transient', 5, undefined, T2001 + 30_500 + i);
  assert.equal(b.recentlyFailing(T2001 + 30_503), true);
  assert.ok(b.failures * 4 < b.outcomes); // the whole buffer would have hidden it
  // A trickle among recent successes stays batched.
  const c = new ReportBuffer(1_000);
  for (let i = 0; i < 10; i++) c.add('success', 50, undefined, T2001 + i);
  c.add('transient', 5, undefined, T2001 + 20);
  assert.equal(c.recentlyFailing(T2001 + 21), false);
});

test('a first report sent when no entity existed waits as long as the largest fleet would, until a count is read', () => {
  const f = new FleetSizes();
  f.saw('k', null, T2001); // the fleet starts together: no entity yet
  const s = new ReportSchedule(o, f, () => 0.5);
  assert.equal(s.everyMs('k'), 60_000); // what the first report tells the entity: count me for that long
  s.reported('k', T2001);
  assert.equal(s.isDue('k', T2001 + 30_000), false);
  // A count read soon after the report is not yet believed (the fleet's other first reports may not be in).
  f.saw('k', { ...CLOSED_VIEW, reporters: 4 }, T2001 + GUESS_SETTLE_MS - 1);
  assert.equal(s.isDue('k', T2001 + GUESS_SETTLE_MS), false);
  // The first count read once settled: 256 reporters (32 s), with the report's own draw of jitter.
  f.saw('k', { ...CLOSED_VIEW, reporters: 256 }, T2001 + GUESS_SETTLE_MS);
  assert.equal(s.everyMs('k'), 32_000);
  assert.equal(s.isDue('k', T2001 + 31_499), false);
  assert.equal(s.isDue('k', T2001 + 31_500), true);
});

test('a worker that starts an entity alone reports at the plain interval once it reads the count', () => {
  const f = new FleetSizes();
  f.saw('k', null, T2001);
  const s = new ReportSchedule(o, f, () => 0.5);
  s.reported('k', T2001);
  assert.equal(s.isDue('k', T2001 + 1_000), false); // no count read yet
  f.saw('k', { ...CLOSED_VIEW, reporters: 1 }, T2001 + GUESS_SETTLE_MS);
  assert.equal(s.isDue('k', T2001 + GUESS_SETTLE_MS), true); // overdue: goes at once
  s.reported('k', T2001 + GUESS_SETTLE_MS);
  assert.equal(s.everyMs('k'), 1_000);
  assert.equal(s.isDue('k', T2001 + GUESS_SETTLE_MS + 499), false);
  assert.equal(s.isDue('k', T2001 + GUESS_SETTLE_MS + 500), true);
});

test('a count read before the first report, or just after it, does not replace the guess', () => {
  const f = new FleetSizes();
  f.saw('k', null, T2001);
  const s = new ReportSchedule(o, f, () => 0.5);
  s.reported('k', T2001 + 10);
  f.saw('k', { ...CLOSED_VIEW, reporters: 2 }, T2001 + 5); // read before the report went (a young entity's count)
  f.saw('k', { ...CLOSED_VIEW, reporters: 2 }, T2001 + 1_000); // and just after
  assert.equal(s.isDue('k', T2001 + 2_000), false);
});

test('a fleet that grew after a report moves the next one out, with the same draw; a count known before the first report is used', () => {
  const f = new FleetSizes();
  f.saw('k', { ...CLOSED_VIEW, reporters: 64 }, T2001); // joining a running fleet: its count is believed
  const s = new ReportSchedule(o, f, () => 0.5);
  assert.equal(s.everyMs('k'), 8_000);
  s.reported('k', T2001);
  assert.equal(s.isDue('k', T2001 + 7_500), true);
  f.saw('k', { ...CLOSED_VIEW, reporters: 256 }, T2001 + 2_000);
  assert.equal(s.isDue('k', T2001 + 7_500), false);
  assert.equal(s.isDue('k', T2001 + 31_500), true);
});

test('failures flush at once in a fleet of at most failureFlushers reporters, whatever the draw', () => {
  const never = new FailureFlushes(8, () => 0.999_999);
  for (const n of [1, 2, 8]) assert.equal(never.flushesNow('w', 'k', n, T2001), true);
  assert.equal(never.flushesNow('w', 'k', 16, T2001), false);
  assert.equal(new FailureFlushes(0, () => 0.999_999).flushesNow('w', 'k', 1_024, T2001), true); // 0: every worker
});

test('in a larger fleet a worker flushes with probability failureFlushers / reporters, drawn per worker, key and second', () => {
  const seeds: string[] = [];
  const f = new FailureFlushes(8, (seed) => (seeds.push(seed), 0.03));
  assert.equal(f.flushesNow('w', 'k', 256, T2001), true); // 0.03 < 8 / 256
  assert.equal(f.flushesNow('w', 'k', 512, T2001), false); // 0.03 >= 8 / 512
  f.flushesNow('w', 'k', 256, T2001 + FLUSH_DRAW_MS - 1);
  f.flushesNow('w', 'k', 256, T2001 + FLUSH_DRAW_MS);
  f.flushesNow('v', 'k', 256, T2001);
  f.flushesNow('w', 'j', 256, T2001);
  // One draw per worker, key and second: the same within a second, a new one in the next, and per worker and key.
  assert.equal(seeds[0], seeds[2]);
  assert.notEqual(seeds[2], seeds[3]);
  assert.equal(new Set([seeds[0], seeds[3], seeds[4], seeds[5]]).size, 4);
});

test('with the seeded draw about failureFlushers workers of a fleet flush each second, a different set each second, two or more in any two seconds', () => {
  const f = new FailureFlushes(8);
  for (const fleet of [16, 60, 240, 1_000]) {
    const reporters = 2 ** Math.ceil(Math.log2(fleet)); // as the entity publishes it
    let total = 0;
    let thin = 0;
    let previous = new Set<number>();
    for (let s = 0; s < 120; s++) {
      const now = T2001 + s * FLUSH_DRAW_MS + 17;
      const flushers = new Set<number>();
      for (let w = 0; w < fleet; w++)
        if (f.flushesNow(`load-${w}`, 'http://127.0.0.1:40117', reporters, now)) flushers.add(w);
      if (flushers.size < 2) thin++;
      // A fast window (1 s) overlaps two seconds' draws: the quorum's two witnesses are there.
      if (s > 0)
        assert.ok(
          new Set([...flushers, ...previous]).size >= 2,
          `fleet ${fleet}, seconds ${s - 1}-${s}: ${flushers.size + previous.size} flushers`,
        );
      assert.ok(
        [...flushers].some((w) => !previous.has(w)),
        `fleet ${fleet}, second ${s}: the same flushers as the second before`,
      );
      previous = flushers;
      total += flushers.size;
    }
    const mean = total / 120;
    const expected = (8 * fleet) / reporters;
    assert.ok(
      Math.abs(mean - expected) <= 0.25 * expected,
      `fleet ${fleet}: ${mean} flushers a second on average, ${expected} expected`,
    );
    assert.ok(thin <= 2, `fleet ${fleet}: ${thin} seconds of 120 with fewer than two flushers`);
  }
});

test('the seeded draw is a number in [0, 1), the same for the same seed', () => {
  for (const seed of ['', 'a', 'load-1\u0000k\u00001', 'load-2\u0000k\u00001']) {
    const d = seededDraw(seed);
    assert.ok(d >= 0 && d < 1);
    assert.equal(seededDraw(seed), d);
  }
  assert.notEqual(seededDraw('load-1\u0000k\u00001'), seededDraw('load-2\u0000k\u00001'));
});
