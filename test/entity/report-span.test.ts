import assert from 'node:assert/strict';
import { test } from 'node:test';
import { splitReport } from '../../src/workflows/breaker-entity/report-span';
import { coarseCount, Roster } from '../../src/workflows/breaker-entity/roster';

test("a report's counts less its earlier part land at arrival; the earlier part is spread", () => {
  const p = splitReport({
    reporter: 'w',
    counts: { success: 210, transient: 3 },
    latency: [5, 200],
    earlier: { counts: { success: 200 }, latency: [5, 190], fromAgoMs: 24_000, toAgoMs: 1_000 },
  });
  assert.deepEqual(p.counts, { success: 10, transient: 3 });
  assert.deepEqual(p.latency, [0, 10]);
  assert.deepEqual(p.earlier, { counts: { success: 200 }, latency: [5, 190], fromAgoMs: 24_000, toAgoMs: 1_000 });
});

test('an earlier part that makes no sense is clipped or ignored, never thrown on', () => {
  const counts = { success: 5 };
  assert.deepEqual(
    splitReport({ reporter: 'w', counts, earlier: { counts: { success: 9 }, fromAgoMs: 10, toAgoMs: 20 } }),
    { counts },
  );
  assert.deepEqual(
    splitReport({ reporter: 'w', counts, earlier: { counts: { success: 9 }, fromAgoMs: Number.NaN, toAgoMs: 0 } }),
    { counts },
  );
  assert.deepEqual(
    splitReport({ reporter: 'w', counts, earlier: { counts: { success: 9 }, fromAgoMs: 10, toAgoMs: 0 } }).counts,
    {},
  );
  assert.deepEqual(
    splitReport({ reporter: 'w', counts, earlier: { counts: { success: 9 }, fromAgoMs: 10, toAgoMs: 0 } }).earlier
      ?.counts,
    { success: 5 },
  );
  assert.deepEqual(splitReport({ reporter: 'w', counts }), { counts });
});

test('a reporter that reports rarely stays counted for its linger, and the carried pairs hold it', () => {
  const r = new Roster(undefined, 5_000);
  r.heard('rare', 0, 60_000);
  r.heard('often', 0);
  assert.equal(r.active(30_000), 1);
  r.prune(30_000);
  const carried = new Roster(r.entries(), 5_000);
  assert.equal(carried.active(64_999), 1);
  assert.equal(carried.active(65_001), 0);
});

test('the published count moves only when the fleet doubles or halves', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 60, 64, 65, 240].map(coarseCount), [0, 1, 2, 4, 4, 8, 64, 64, 128, 256]);
});
