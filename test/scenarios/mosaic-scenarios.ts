import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { createActivityRuntime } from '../../src/activities';
import { servedFetchQueue } from '../../src/activities/mosaic/fetch-queue';
import { createFetchWorker } from '../../src/client/worker';
import { TEST_ROOTS, uniqueTaskQueue, workflowsPath } from '../helpers/temporal-env';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { prepareSeed, seedWorkflowId, startSeed } from '../../src/client/seeds';
import { resolveRequestPaths, startMosaic } from '../../src/client/mosaics';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { adminSignal } from '../../src/messages/breaker';
import { progressQuery } from '../../src/messages/mosaic';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import type { ScheduledMosaicInput } from '../../src/messages/scheduled-mosaic';
import type { EntityScenario, ScenarioContext } from './entity-scenarios';

/** The breaker of the workers that record mosaic scenarios: quick to trip and to cool down. */
export const SCENARIO_BREAKER = {
  config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 },
};

function request(s: DemoTileServer, dir: string, extra: Partial<MosaicRequest>): MosaicRequest {
  return {
    source: { type: 'xyz', url: s.template, concurrency: 2 },
    sourceName: 'demo',
    bbox: [2.0, 42.0, 19.5, 49.9],
    zoom: 8,
    output: path.join(dir, 'mosaic.tif'),
    batchSize: 16,
    parallelBatches: 2,
    ...extra,
  };
}

async function withServer(
  opts: Parameters<typeof startDemoTileServer>[0],
  fn: (s: DemoTileServer, dir: string) => Promise<WorkflowHandle>,
): Promise<WorkflowHandle> {
  const s = await startDemoTileServer(opts);
  try {
    return await fn(s, mkdtempSync(path.join(tmpdir(), 'tilebreaker-scenario-')));
  } finally {
    await s.close();
  }
}

const mosaicRun =
  (name: string, server: Parameters<typeof startDemoTileServer>[0], extra: Partial<MosaicRequest>): EntityScenario =>
  ({ client, taskQueue }: ScenarioContext) =>
    withServer(server, async (s, dir) => {
      const h = await startMosaic(client, taskQueue, request(s, dir, extra), name);
      await h.result();
      return h;
    });

/** fail-fast through an outage, then a re-drive of the dead letters once the renderer is back. */
const redriveAfterOutage: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 2_000 }, async (s, dir) => {
    const h = await startMosaic(client, taskQueue, request(s, dir, { fallback: 'fail-fast' }), 'redrive-source');
    const result = await h.result();
    while (s.isDown()) await new Promise((r) => setTimeout(r, 100));
    await client.workflow
      .getHandle(breakerWorkflowId(breakerKey(s.url)))
      .signal(adminSignal, { action: 'reset', reason: 'recording' });
    const r = await client.workflow.start('redriveMosaicWorkflow', {
      taskQueue,
      workflowId: 'mosaic-redrive',
      args: [{ manifest: result.manifest }],
    });
    await r.result();
    return r;
  });

/**
 * fail-fast into an outage that lasts, then a re-drive started while the breaker still refuses: it waits
 * (progress says for which breaker), the renderer comes back during the wait, and the one run recovers all.
 */
const redriveWaits: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 10 * 60_000 }, async (s, dir) => {
    const h = await startMosaic(client, taskQueue, request(s, dir, { fallback: 'fail-fast' }), 'redrive-wait-source');
    const result = await h.result();
    const r = await client.workflow.start('redriveMosaicWorkflow', {
      taskQueue,
      workflowId: 'mosaic-redrive-wait',
      args: [{ manifest: result.manifest, waitForMs: 5 * 60_000 }],
    });
    for (let k = 0; k < 300; k++) {
      const p = await r.query(progressQuery).catch(() => null);
      if (p?.waitingFor) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    s.setDown(false);
    await r.result();
    return r;
  });

/**
 * A mosaic started without the Mosaic* attributes on a server that has them: it asks once whether they are
 * registered, then keeps them current (the other path, a start that carried them, is mosaic-search-attributes).
 */
const attributesAsked: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5 }, async (s, dir) => {
    const h = await client.workflow.start('mosaicWorkflow', {
      taskQueue,
      workflowId: 'mosaic-search-attributes-asked',
      args: [request(s, dir, {})],
    });
    await h.result();
    return h;
  });

/** Once the recording worker's fetch worker has polled (the planner asks the server), a mosaic. */
const fetchQueueRouted: EntityScenario = async (ctx) => {
  for (let i = 0; i < 100 && !(await servedFetchQueue(ctx.client, ctx.taskQueue, 60_000)); i++)
    await new Promise((r) => setTimeout(r, 100));
  return mosaicRun('mosaic-fetch-queue-routed', { latencyMs: 5 }, {})(ctx);
};

/**
 * The plan names the fetch queue, but its only fetch worker stopped after polling (the server still lists it):
 * every batch times out unstarted after 1 s (schedule-to-start) and runs on the main queue. On a task queue of
 * its own, served by a worker of one's own with that 1 s, not by the recording worker.
 */
const fetchQueueFallback: EntityScenario = async ({ env, client }) => {
  const taskQueue = uniqueTaskQueue('fetch-queue-fallback');
  const runtime = createActivityRuntime({
    client,
    taskQueue,
    roots: TEST_ROOTS,
    breaker: SCENARIO_BREAKER,
    fetchQueueStartWithinMs: 1_000,
  });
  try {
    const fetcher = await createFetchWorker({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue,
      activities: runtime.activities,
    });
    const fetching = fetcher.run();
    for (let i = 0; i < 100 && !(await servedFetchQueue(client, taskQueue, 60_000)); i++)
      await new Promise((r) => setTimeout(r, 100));
    fetcher.shutdown();
    await fetching;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue,
      workflowsPath,
      activities: runtime.activities,
    });
    return await worker.runUntil(
      mosaicRun('mosaic-fetch-queue-fallback', { latencyMs: 5 }, {})({ env, client, taskQueue }),
    );
  } finally {
    await runtime.close();
  }
};

/**
 * A schedule's run (overlap buffer-one) that finds its output's id held by a run by hand: it waits for that run
 * to end (awaitWorkflowClosed), then starts its mosaic as a child under the id and returns its result.
 */
const scheduledWaits: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 100 }, async (s, dir) => {
    const req = resolveRequestPaths(request(s, dir, {}));
    const manual = await startMosaic(client, taskQueue, req);
    const input: ScheduledMosaicInput = {
      request: req,
      workflowId: manual.workflowId,
      overlap: 'buffer-one',
      scheduleId: 'recording',
      label: { name: 'mosaic', source: 'demo', zoom: req.zoom, output: req.output },
      attributes: true,
    };
    const h = await client.workflow.start('scheduledMosaicWorkflow', {
      taskQueue,
      workflowId: 'mosaic-scheduled-waits',
      args: [input],
    });
    await manual.result();
    await h.result();
    return h;
  });

/**
 * A `wait` mosaic through a 40 s outage with a small history budget per run (eventsPerRun 200): its passes
 * fill a run's history and it continues as new, carrying the plan, the pending tiles and its counts, until
 * the renderer is back and the last run assembles. Inline (one block), or in block children of 24 tiles
 * whose first block waits out the outage (then the block's chain is what is recorded).
 */
const continueAsNew =
  (name: string, blocks: boolean): EntityScenario =>
  ({ client, taskQueue }: ScenarioContext) =>
    withServer({ latencyMs: 5, outageAfterRequests: 8, outageMs: 40_000 }, async (s, dir) => {
      const extra: Partial<MosaicRequest> = {
        fallback: 'wait',
        deadline: '10m',
        eventsPerRun: 200,
        batchSize: 8,
        ...(blocks ? { blockTiles: 24, maxTiles: 1_000 } : {}),
      };
      const h = await startMosaic(client, taskQueue, request(s, dir, extra), name);
      await h.result();
      return blocks ? client.workflow.getHandle(`${h.workflowId}/p0-block-0`) : h;
    });

/**
 * A re-drive that waits out a 40 s outage with a small history budget per run (eventsPerRun 200, carried from
 * the first run's plan): its passes fill a run's history and it continues as new, carrying the plan, the
 * pending tiles, its deadline and counts, until the renderer is back and the last run recovers every tile.
 */
const redriveContinueAsNew: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5, outageAfterRequests: 8, outageMs: 40_000 }, async (s, dir) => {
    const h = await startMosaic(
      client,
      taskQueue,
      request(s, dir, { fallback: 'fail-fast', eventsPerRun: 200, batchSize: 8 }),
      'redrive-continue-source',
    );
    const result = await h.result();
    const r = await client.workflow.start('redriveMosaicWorkflow', {
      taskQueue,
      workflowId: 'mosaic-redrive-continue-as-new',
      args: [{ manifest: result.manifest, waitForMs: 10 * 60_000 }],
    });
    await r.result();
    return r;
  });

/**
 * A source with a mirror (a second demo server, the same tiles): the primary goes down for good mid-run, the
 * mirror serves what its breaker refuses; the primary comes back, and a re-drive with replaceMirrors fetches the
 * mirror's tiles from it (the redrive workflow's replaceMirrors path).
 */
const mirrorRedrive: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 10 * 60_000 }, async (s, dir) => {
    const mirror = await startDemoTileServer({ latencyMs: 5 });
    try {
      const sourcesFile = path.join(dir, 'sources.yaml');
      writeFileSync(
        sourcesFile,
        `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    concurrency: 2\n    mirrors: [copy]\n  copy:\n    type: xyz\n    url: "${mirror.template}"\n    concurrency: 2\n`,
      );
      const { source: _inline, ...req } = request(s, dir, { fallback: 'hole' });
      const h = await startMosaic(
        client,
        taskQueue,
        { ...req, sourcesFile, sourceName: 'demo' },
        'mirror-redrive-source',
      );
      const result = await h.result();
      s.setDown(false);
      await client.workflow
        .getHandle(breakerWorkflowId(breakerKey(s.url)))
        .signal(adminSignal, { action: 'reset', reason: 'recording' });
      const r = await client.workflow.start('redriveMosaicWorkflow', {
        taskQueue,
        workflowId: 'mosaic-mirror-redrive',
        args: [{ manifest: result.manifest, replaceMirrors: true }],
      });
      await r.result();
      return r;
    } finally {
      await mirror.close();
    }
  });

/** A seed over levels `first`-`last` into MBTiles: a mosaic child without an image per level, then the pack activity. */
const seedLevels =
  (id: string, first: number, last: number): EntityScenario =>
  ({ client, taskQueue }) =>
    withServer({ latencyMs: 5 }, async (s, dir) => {
      const sourcesFile = path.join(dir, 'sources.yaml');
      writeFileSync(sourcesFile, `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    concurrency: 2\n`);
      const h = await startSeed(
        client,
        taskQueue,
        {
          sourcesFile,
          sourceName: 'demo',
          bbox: [5.7, 44.0, 8.5, 46.6],
          levels: [first, last],
          into: path.join(dir, 'alps.mbtiles'),
        },
        id,
      );
      await h.result();
      return h;
    });

/** A seed schedule's run: the launcher starts the seed under the file's own id and returns its result. */
const seedScheduled: EntityScenario = ({ client, taskQueue }) =>
  withServer({ latencyMs: 5 }, async (s, dir) => {
    const sourcesFile = path.join(dir, 'sources.yaml');
    writeFileSync(sourcesFile, `sources:\n  demo:\n    type: xyz\n    url: "${s.template}"\n    concurrency: 2\n`);
    const request = prepareSeed({
      sourcesFile,
      sourceName: 'demo',
      bbox: [5.7, 44.0, 8.5, 46.6],
      levels: [5, 6],
      into: path.join(dir, 'weekly.mbtiles'),
    });
    const h = await client.workflow.start('scheduledSeedWorkflow', {
      taskQueue,
      workflowId: 'seed-scheduled',
      args: [{ request, workflowId: seedWorkflowId(request.into), scheduleId: 'weekly' }],
    });
    await h.result();
    return h;
  });

export const mosaicScenarios = {
  // A seed: one mosaic child per level, no image, the levels' tiles packed into MBTiles.
  'seed-levels': seedLevels('seed-levels', 5, 6),
  // Levels 4-7 with up to three running at once: the fourth starts as one ends.
  'seed-levels-at-once': seedLevels('seed-levels-at-once', 4, 7),
  // A seed schedule's run: the seed started as a child under the file's own id.
  'seed-scheduled': seedScheduled,
  // A mirror served the refused tiles; a re-drive with replaceMirrors fetches them from the primary again.
  'mosaic-mirror-redrive': mirrorRedrive,
  'mosaic-fail-fast-outage': mosaicRun(
    'mosaic-fail-fast-outage',
    { latencyMs: 5, outageAfterRequests: 40, outageMs: 2_000 },
    { fallback: 'fail-fast' },
  ),
  'mosaic-wait-outage': mosaicRun(
    'mosaic-wait-outage',
    { latencyMs: 5, outageAfterRequests: 40, outageMs: 2_000 },
    { fallback: 'wait', deadline: '10m' },
  ),
  'mosaic-blocks': mosaicRun('mosaic-blocks', {}, { blockTiles: 48 }),
  'mosaic-redrive': redriveAfterOutage,
  'mosaic-redrive-wait': redriveWaits,
  // Name, source, zoom, status and progress kept current by the workflow.
  'mosaic-search-attributes': mosaicRun('mosaic-search-attributes', { latencyMs: 5 }, { blockTiles: 48 }),
  'mosaic-search-attributes-asked': attributesAsked,
  // The recording worker serves `<task queue>-fetch` too: the plan names it and every batch goes there.
  'mosaic-fetch-queue-routed': fetchQueueRouted,
  // The plan names the fetch queue, nobody serves it any more: each batch falls back to the main queue.
  'mosaic-fetch-queue-fallback': fetchQueueFallback,
  // A schedule's run waits for a run by hand of its output to end, then runs the mosaic under the output's id.
  'mosaic-scheduled-waits': scheduledWaits,
  // Runs continue as new: the first run of each chain and its last are recorded.
  'mosaic-wait-continue-as-new': continueAsNew('mosaic-wait-continue-as-new', false),
  'mosaic-block-continue-as-new': continueAsNew('mosaic-block-continue-as-new', true),
  'mosaic-redrive-continue-as-new': redriveContinueAsNew,
} as const;
