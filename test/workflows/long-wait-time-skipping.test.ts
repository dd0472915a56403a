import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { createActivityRuntime } from '../../src/activities';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { durationMs } from '../../src/messages/duration';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { DEFAULT_EVENTS_PER_RUN } from '../../src/workflows/mosaic-continue';
import { assertAccounted, readManifest, tileBoxRequest } from '../helpers/mosaic';
import { TEST_ROOTS, timeSkippingEnv, uniqueTaskQueue, workflowsPath } from '../helpers/temporal-env';

/*
 * A `wait` mosaic with a 7-day deadline against a tile server that never recovers, on the time-skipping
 * server: the week passes on durable timers in minutes of wall time. Each run of the chain continues as new
 * before its history grows large; the chain ends at the deadline with a manifest that dead-letters every tile.
 *
 * The breaker cools down for a day, so each retry pass waits the longest a watched wait may (60 minutes of
 * workflow time), as a mosaic against a server that stays down does once its breaker's cooldown has grown.
 * The `awaitBreaker` watch is an activity that polls in real time for the whole wait (minutes), which the
 * time-skipping server cannot skip: here it declines at once, and the workflow takes its own fallback for a
 * failed watch, a durable timer.
 */

const DAY = 86_400_000;
const BREAKER = { config: { minSamples: 2, fastMinSamples: 2, cooldownMs: 24 * 3_600_000, cooldownMaxFactor: 1 } };
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-long-wait-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  runId: string;
  events: number;
  startedAt: number;
  closedAt: number;
  closedAs: string;
}

/** Every run of a workflow id's chain, first to last, walked back from the newest by continuedExecutionRunId. */
async function runChain(client: Client, workflowId: string): Promise<Run[]> {
  const runs: Run[] = [];
  let runId: string | undefined;
  for (;;) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events = history.events ?? [];
    const first = events[0]!;
    const last = events.at(-1)!;
    const closedAs =
      Object.keys(last).find(
        (k) => k.startsWith('workflowExecution') && k.endsWith('EventAttributes') && last[k as keyof typeof last],
      ) ?? '?';
    runs.unshift({
      runId: runId ?? '(newest)',
      events: events.length,
      startedAt: Number(first.eventTime?.seconds ?? 0) * 1000,
      closedAt: Number(last.eventTime?.seconds ?? 0) * 1000,
      closedAs: closedAs.replace(/^workflowExecution|EventAttributes$/g, ''),
    });
    const previous = first.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
    if (!previous) return runs;
    runId = previous;
  }
}

async function longWait(
  t: { diagnostic(m: string): void },
  name: string,
  box: { cols: number; rows: number },
  extra: { blockTiles?: number; deadline?: string; eventsPerRun?: number },
  minRuns: number,
): Promise<void> {
  // A server and a tile server of its own: the planner's clock is the real one, and after a skipped week of
  // another test the workflow clock would be a week ahead of it (the deadline already past).
  const env = await timeSkippingEnv();
  const server = await startDemoTileServer({});
  server.setDown(true);
  const taskQueue = uniqueTaskQueue(name);
  const runtime = createActivityRuntime({ client: env.client, taskQueue, roots: TEST_ROOTS, breaker: BREAKER });
  const declines = (): Promise<never> =>
    Promise.reject(ApplicationFailure.nonRetryable('no breaker watch on the time-skipping server', 'NoWatch'));
  try {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowsPath,
      activities: { ...runtime.activities, awaitBreaker: declines },
    });
    const days = durationMs(extra.deadline ?? '7d')! / DAY;
    const request = tileBoxRequest(server, dir, name, box, {
      fallback: 'wait',
      deadline: '7d',
      batchSize: 2,
      parallelBatches: 2,
      blockTiles: 64,
      maxTiles: box.cols * box.rows,
      ...extra,
    });
    const workflowId = `mosaic/${name}`;
    const wallStart = Date.now();
    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start('mosaicWorkflow', { taskQueue, workflowId, args: [request] });
      return (await handle.result()) as MosaicResult;
    });
    const wallS = (Date.now() - wallStart) / 1000;

    // (b) The chain ends after the deadline, every tile dead-lettered, each with the breaker's refusal as reason.
    const manifest = readManifest(result);
    assert.equal(assertAccounted(manifest), null);
    assert.equal(manifest.counts['dead-lettered'], box.cols * box.rows, JSON.stringify(manifest.counts));
    for (const tile of manifest.tiles)
      assert.match(tile.reason, /breaker|half-open|503/, `tile ${tile.i}: ${tile.reason}`);
    t.diagnostic(
      `${name}: manifest ${JSON.stringify(manifest.counts)}; reasons: ${[...new Set(manifest.tiles.map((x) => x.reason))].join(' | ')}`,
    );

    // (a) and (c): every run of the mosaic's chain (and of its blocks' chains) well under 10,240 events.
    const chains = [{ id: workflowId, runs: await runChain(env.client, workflowId) }];
    const blocks = extra.blockTiles ? Math.ceil((box.cols * box.rows) / extra.blockTiles) : 0;
    for (let b = 0; b < blocks; b++)
      chains.push({
        id: `${workflowId}/p0-block-${b}`,
        runs: await runChain(env.client, `${workflowId}/p0-block-${b}`),
      });
    const all = chains.flatMap((c) => c.runs);
    const first = chains[0]!.runs[0]!;
    const lastClose = Math.max(...all.map((r) => r.closedAt));
    const most = Math.max(...all.map((r) => r.events));
    for (const c of chains) {
      t.diagnostic(
        `${c.id}: ${c.runs.length} run(s), events per run ${c.runs.map((r) => r.events).join(', ')}; closed as ${c.runs.map((r) => r.closedAs).join(', ')}`,
      );
    }
    t.diagnostic(
      `${name}: most events in one run ${most} (continue-as-new after ${extra.eventsPerRun ?? DEFAULT_EVENTS_PER_RUN}); ${all.length} runs in all; chain closed ${((lastClose - first.startedAt) / DAY).toFixed(2)} days after the first; wall time ${wallS.toFixed(0)} s`,
    );
    assert.ok(most < 10_240 / 3, `a run had ${most} events`);
    const longest = chains.reduce((a, c) => (c.runs.length > a.runs.length ? c : a));
    assert.ok(
      longest.runs.length >= minRuns,
      `the longest chain had ${longest.runs.length} runs, expected at least ${minRuns}`,
    );
    for (const c of chains) {
      assert.ok(
        c.runs.slice(0, -1).every((r) => r.closedAs === 'ContinuedAsNew'),
        `${c.id}: ${c.runs.map((r) => r.closedAs).join(', ')}`,
      );
      assert.equal(c.runs.at(-1)!.closedAs, 'Completed');
    }
    // The waiting went on until the deadline, not less.
    assert.ok(
      lastClose - first.startedAt >= days * DAY - 60_000,
      `the chain's runs span ${(lastClose - first.startedAt) / DAY} days`,
    );
  } finally {
    await runtime.close();
    await server.close();
    await env.teardown();
  }
}

// About 170 passes of about 17 events each (the declined watch adds its own): two runs at the default budget.
test('a week-long wait on a server that never recovers continues as new and ends at its deadline, every tile accounted for', async (t) => {
  await longWait(t, 'week-inline', { cols: 2, rows: 2 }, {}, 2);
});

// Two days in blocks with a budget of 300 events (the request's eventsPerRun): the first block's chain has
// several runs, and the mosaic still gets the block's result from the chain's last run.
test('a wait in block child workflows: the block continues as new and the mosaic gets its result', async (t) => {
  await longWait(t, 'days-blocks', { cols: 4, rows: 2 }, { blockTiles: 4, deadline: '2d', eventsPerRun: 300 }, 3);
});
