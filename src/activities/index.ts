import type { Client } from '@temporalio/client';
import { asyncLocalStorage } from '@temporalio/activity';
import { Runtime } from '@temporalio/worker';
import type { ActivityFunction } from '@temporalio/common';
import { makeFetchBatch } from './fetch/fetch-batch';
import { BreakerGuard, processIdentity, witnessIdentity, type GuardOptions } from './guard';
import { EndpointPools } from './http/endpoint-pool';
import { assembleMosaic } from './mosaic/assemble';
import { makeMosaicBatch } from './mosaic/batch';
import { loadDeadLetters } from './mosaic/dead-letters';
import { packMbtiles } from './seed/pack';
import { makeAwaitBreaker } from './mosaic/await-breaker';
import { makeAwaitWorkflowClosed } from './mosaic/await-workflow';
import { planMosaicRun } from './mosaic/plan';
import { DEFAULT_FETCH_QUEUE_START_WITHIN_MS, withFetchQueue } from './mosaic/fetch-queue';
import { probeEndpoint } from './probe';
import { entityKeyOf } from '../breaker/key';
import { makeMosaicSearchAttributeCheck, makeSearchAttributeCheck } from './search-attributes';
import { rootsFromEnv, type WorkerRoots } from './confine/roots';
import type {
  BreakerActivities,
  MosaicActivities,
  ScheduledMosaicActivities,
  SeedActivities,
} from '../messages/activities';
import type { PackMbtilesInput } from '../messages/seed-types';
import type { ProbeSpec } from '../messages/breaker';
import type { RedriveSources } from '../messages/mosaic-types';
import { WorkerMetrics } from './metrics/worker-metrics';
import { DeadLetterWatch } from './metrics/dead-letter-watch';
import { mosaicEndMetrics } from './metrics/mosaic-metrics';

export interface ActivityDeps {
  /** A client of the worker's own Temporal namespace (for the search-attribute check, guards, signals). */
  client: Client;
  /** The task queue breaker entities run on (this worker's). */
  taskQueue: string;
  /** Policy and self-probe for the breaker entities this worker's guard creates (an existing entity keeps its own). */
  breaker?: Pick<GuardOptions, 'config' | 'probe' | 'entityOptions'>;
  /**
   * Where requesters' sources files may be read and their outputs written (default: TILEBREAKER_SOURCES_DIR
   * and TILEBREAKER_OUTPUT_DIR, else the working directory). Every activity checks its paths against them.
   */
  roots?: WorkerRoots;
  /** This process's id among the breakers' reporters (default: unique per process, see processIdentity). */
  identity?: string;
  /** Its witness in the breakers' quorum (default: its host, or TILEBREAKER_REPORTER_ID; see witnessIdentity). */
  witness?: string;
  /**
   * Where the worker's metrics go (default: the SDK runtime's meter, a no-op unless the runtime was installed
   * with telemetry, as `tilebreaker worker --metrics-addr` does).
   */
  metrics?: WorkerMetrics;
  /**
   * How long a fetch batch sent to the fetch task queue may wait for a fetch worker before it runs on the main
   * queue (default DEFAULT_FETCH_QUEUE_START_WITHIN_MS, 2 min; 1 s to 24 h). Plans made here carry it.
   */
  fetchQueueStartWithinMs?: number;
}

/**
 * Every activity the tilebreaker worker registers, built from its dependencies, and `close()` for what they
 * share: one connection pool set and one breaker guard per worker process.
 */
export function createActivityRuntime(deps: ActivityDeps) {
  // Checked before anything is opened.
  const startWithinMs = fetchQueueStartWithin(deps);
  const pools = new EndpointPools();
  const roots = deps.roots ?? rootsFromEnv();
  const identity = deps.identity ?? processIdentity('worker');
  // Asked for at each event, not now: the runtime is the worker's, created with it.
  const metrics = deps.metrics ?? new WorkerMetrics(() => Runtime.instance().metricMeter);
  const deadLetters = new DeadLetterWatch(metrics);
  const onMosaicEnd = mosaicEndMetrics(metrics, deadLetters);
  // The quorum counts hosts: a restarted worker, or a second one on the host, is the same witness.
  const witness = deps.witness ?? witnessIdentity();
  const guard = new BreakerGuard({
    client: deps.client,
    taskQueue: deps.taskQueue,
    reporter: identity,
    witness,
    logger: guardLogger,
    metrics,
    ...deps.breaker,
  });
  return {
    activities: workerActivities({ deps, startWithinMs, pools, roots, metrics, onMosaicEnd, guard }),
    roots,
    /** The id this process's guard reports under. */
    identity,
    /** Its witness in the breakers' quorum: the host, the same across restarts (unless configured). */
    witness,
    /** Flushes the guard's buffered reports and closes the HTTP pools. */
    async close(): Promise<void> {
      deadLetters.stop();
      await guard.close();
      await pools.close();
    },
  };
}

/** `deps.fetchQueueStartWithinMs` or its default, refused when it is not 1 s to 24 h in whole milliseconds. */
function fetchQueueStartWithin(deps: ActivityDeps): number {
  const startWithinMs = deps.fetchQueueStartWithinMs ?? DEFAULT_FETCH_QUEUE_START_WITHIN_MS;
  if (!Number.isSafeInteger(startWithinMs) || startWithinMs < 1_000 || startWithinMs > 86_400_000)
    throw new Error(
      `fetchQueueStartWithinMs must be a whole number of milliseconds from 1000 to 86400000 (got ${String(startWithinMs)})`,
    );
  return startWithinMs;
}

/** The guard's warnings (failing open) go to the worker's logger, as structured entries. */
const guardLogger = {
  warn: (message: string, meta?: Record<string, unknown>): void => {
    Runtime.instance().logger.warn(`tilebreaker guard: ${message}`, meta);
  },
};

/** What the worker's activities share: its dependencies and the process's pools, guard and metrics. */
interface ActivityParts {
  deps: ActivityDeps;
  startWithinMs: number;
  pools: EndpointPools;
  roots: WorkerRoots;
  metrics: WorkerMetrics;
  onMosaicEnd: ReturnType<typeof mosaicEndMetrics>;
  guard: BreakerGuard;
}

/** The activities, by the names the workflows schedule them under. */
function workerActivities({ deps, startWithinMs, pools, roots, metrics, onMosaicEnd, guard }: ActivityParts) {
  // The queue the planning activity was scheduled on (the workflow's); outside an activity (tests), the worker's.
  const ownQueue = () => asyncLocalStorage.getStore()?.info.taskQueue ?? deps.taskQueue;
  // Where a plan's fetch batches go: the fetch queue if a worker polls it now, else the queue the workflow (and
  // so this planning activity) runs on. Decided in the activity, so the workflow replays it from the history.
  const routed = (plan: Awaited<ReturnType<typeof planMosaicRun>>) =>
    withFetchQueue(plan, deps.client, ownQueue(), startWithinMs);
  return {
    // Labelled with the probing entity's key (its workflow id is breaker/<key>).
    probeEndpoint: (spec: ProbeSpec) =>
      probeEndpoint(
        spec,
        metrics,
        entityKeyOf(asyncLocalStorage.getStore()?.info.workflowExecution?.workflowId),
        roots,
      ),
    breakerSearchAttributesRegistered: makeSearchAttributeCheck(deps.client),
    mosaicSearchAttributesRegistered: makeMosaicSearchAttributeCheck(deps.client),
    fetchTiles: makeFetchBatch({ pools, guard, roots, metrics }),
    // Histories recorded before run tags call it with the request alone.
    planMosaic: async (request: Parameters<typeof planMosaicRun>[0], runTag?: string) =>
      routed(await planMosaicRun(request, runTag ?? 'run', roots)),
    fetchMosaicBatch: makeMosaicBatch({ pools, guard, roots, metrics }),
    assembleMosaic: (input: Parameters<typeof assembleMosaic>[0]) => assembleMosaic(input, roots, onMosaicEnd),
    // A re-drive's batches go where the fleet serves now, not where the first run's did.
    loadDeadLetters: async (
      manifestOrOutput: string,
      sources?: RedriveSources | null,
      opts?: { replaceMirrors?: boolean },
    ) => {
      const letters = await loadDeadLetters(
        manifestOrOutput,
        sources ?? undefined,
        roots,
        opts?.replaceMirrors === true,
      );
      return { ...letters, plan: await routed(letters.plan) };
    },
    awaitBreaker: makeAwaitBreaker({ guard }),
    awaitWorkflowClosed: makeAwaitWorkflowClosed(deps.client),
    packMbtiles: (input: PackMbtilesInput) => packMbtiles(input, roots),
    // The workflows schedule these by the contract in src/messages: a drift fails the build here.
  } satisfies BreakerActivities &
    MosaicActivities &
    ScheduledMosaicActivities &
    SeedActivities &
    Record<string, ActivityFunction>;
}

/** The activities alone (for tests and for workers that manage resources themselves). */
export function createActivities(deps: ActivityDeps) {
  return createActivityRuntime(deps).activities;
}

export type Activities = ReturnType<typeof createActivities>;
