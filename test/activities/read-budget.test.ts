import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EntityLink } from '../../src/activities/guard/entity-link';
import type { GuardStats } from '../../src/activities/guard/types';
import { ACTIVE_FOR_MS, ReadBudget } from '../../src/activities/guard/read-budget';
import { CLOSED_VIEW, ViewCache, type CachedView } from '../../src/activities/guard/view-cache';
import { Reachability } from '../../src/activities/guard/reachability';

/** An arbitrary instant far from today. */
const T2001 = Date.UTC(2001, 5, 7);

test('one read a second is shared among the keys in use: each key is kept keys / rate seconds, never under the TTL', () => {
  const b = new ReadBudget(1);
  assert.equal(b.ttlMs('a', T2001, 500), 1_000);
  for (const k of ['b', 'c', 'd']) b.ttlMs(k, T2001, 500);
  assert.equal(b.ttlMs('a', T2001 + 10, 500), 4_000);
  assert.equal(b.activeKeys(), 4);
  // b, c and d fall out of use: a has the budget to itself again.
  assert.equal(b.ttlMs('a', T2001 + ACTIVE_FOR_MS + 1, 500), 1_000);
  assert.equal(b.ttlMs('a', T2001 + ACTIVE_FOR_MS + 2, 1_500), 1_500);
  assert.equal(new ReadBudget(4).ttlMs('a', T2001, 100), 250);
  assert.equal(new ReadBudget(0).ttlMs('a', T2001, 500), 500); // 0: no bound
});

function cacheWith(budget: ReadBudget) {
  let describes = 0;
  const link = {
    rpc: <T>(fn: () => Promise<T>) => fn(),
    noteUnreachable: () => {},
    reach: new Reachability(5_000),
    handle: () => ({
      describe: () => {
        describes++;
        return Promise.resolve({
          status: { name: 'RUNNING' },
          memo: { view: CLOSED_VIEW },
          historyLength: 50,
          startTime: new Date(),
          raw: { workflowExecutionInfo: { firstRunId: 'r' } },
        });
      },
    }),
  } as unknown as EntityLink;
  const views = new ViewCache(
    new Map<string, CachedView>(),
    link,
    { viewReads: 0 } as GuardStats,
    0,
    () => false,
    () => {},
    budget,
  );
  return { views, describes: () => describes };
}

test('within the budget a view is read once, and read again at once when this process saw failures (invalidate)', async () => {
  // A budget so small that no read falls due during the test, whatever the machine's speed.
  const { views, describes } = cacheWith(new ReadBudget(1 / 3_600));
  for (let i = 0; i < 20; i++) await views.get('k');
  assert.equal(describes(), 1);
  views.invalidate('k');
  await views.get('k');
  assert.equal(describes(), 2);
});
