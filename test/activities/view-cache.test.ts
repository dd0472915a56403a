import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BreakerView } from '../../src/breaker';
import type { EntityLink } from '../../src/activities/guard/entity-link';
import { Reachability } from '../../src/activities/guard/reachability';
import type { GuardStats } from '../../src/activities/guard/types';
import { CLOSED_VIEW, ViewCache, type CachedView } from '../../src/activities/guard/view-cache';

// What the guard's view cache makes of an entity run with no memo yet (a run younger than its first workflow
// task), by the run chain it belongs to. The entity is a stand-in: what DescribeWorkflowExecution answers.

interface Described {
  memo?: { view: BreakerView };
  firstRunId?: string;
}

function cacheOver(answers: Described[]) {
  const described = [...answers];
  const link = {
    rpc: <T>(fn: () => Promise<T>) => fn(),
    noteUnreachable: () => {},
    reach: new Reachability(5_000),
    handle: () => ({
      describe: () => {
        const d = described.shift()!;
        return Promise.resolve({
          status: { name: 'RUNNING' },
          memo: d.memo,
          historyLength: 3,
          startTime: new Date(),
          raw: { workflowExecutionInfo: { firstRunId: d.firstRunId ?? '' } },
        });
      },
      query: () => Promise.reject(new Error('a young run is not queried')),
    }),
  } as unknown as EntityLink;
  const stats = { viewReads: 0 } as GuardStats;
  return new ViewCache(new Map<string, CachedView>(), link, stats, 0, () => false);
}

const OPEN = { ...CLOSED_VIEW, state: 'open' } as BreakerView;

test("a young run of the same chain (a continue-as-new's next run) keeps the last view: an open breaker is not read as closed", async () => {
  const views = cacheOver([{ memo: { view: OPEN }, firstRunId: 'run-1' }, { firstRunId: 'run-1' }]);
  assert.equal(await views.get('k'), OPEN);
  assert.equal(await views.get('k'), OPEN);
});

test('a young run of a new chain (an entity terminated and started afresh) is a new, closed breaker', async () => {
  const views = cacheOver([{ memo: { view: OPEN }, firstRunId: 'run-1' }, { firstRunId: 'run-9' }]);
  assert.equal(await views.get('k'), OPEN);
  assert.equal(await views.get('k'), null);
});

test('a server that names no first run id keeps the last view (the conservative reading)', async () => {
  const views = cacheOver([{ memo: { view: OPEN } }, {}]);
  assert.equal(await views.get('k'), OPEN);
  assert.equal(await views.get('k'), OPEN);
});
