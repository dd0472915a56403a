import type { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import type { ActivityFunction } from '@temporalio/common';
import { makeFetchBatch } from './fetch/fetch-batch';
import { BreakerGuard, processIdentity, type GuardOptions } from './guard';
import { EndpointPools } from './http/endpoint-pool';
import { assembleMosaic } from './mosaic/assemble';
import { makeMosaicBatch } from './mosaic/batch';
import { loadDeadLetters } from './mosaic/dead-letters';
import { makeAwaitBreaker } from './mosaic/await-breaker';
import { planMosaicRun } from './mosaic/plan';
import { probeEndpoint } from './probe';
import { makeMosaicSearchAttributeCheck, makeSearchAttributeCheck } from './search-attributes';
import { rootsFromEnv, type WorkerRoots } from './confine/roots';
import type { BreakerActivities, MosaicActivities } from '../messages/activities';
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
  /**
   * Where the worker's metrics go (default: the SDK runtime's meter, a no-op unless the runtime was installed
   * with telemetry, as `tilebreaker worker --metrics-addr` does).
   */
  metrics?: WorkerMetrics;
}

/**
 * Every activity the tilebreaker worker registers, built from its dependencies, and `close()` for what they
 * share: one connection pool set and one breaker guard per worker process.
 */
export function createActivityRuntime(deps: ActivityDeps) {
  const pools = new EndpointPools();
  const roots = deps.roots ?? rootsFromEnv();
  // The guard's warnings (failing open) go to the worker's logger, as structured entries.
  const logger = {
    warn: (message: string, meta?: Record<string, unknown>): void => {
      Runtime.instance().logger.warn(`tilebreaker guard: ${message}`, meta);
    },
  };
  const identity = deps.identity ?? processIdentity('worker');
  // Asked for at each event, not now: the runtime is the worker's, created with it.
  const metrics = deps.metrics ?? new WorkerMetrics(() => Runtime.instance().metricMeter);
  const deadLetters = new DeadLetterWatch(metrics);
  const onMosaicEnd = mosaicEndMetrics(metrics, deadLetters);
  const guard = new BreakerGuard({ client: deps.client, taskQueue: deps.taskQueue, reporter: identity, logger, metrics, ...deps.breaker });
  return {
    activities: {
      probeEndpoint,
      breakerSearchAttributesRegistered: makeSearchAttributeCheck(deps.client),
      mosaicSearchAttributesRegistered: makeMosaicSearchAttributeCheck(deps.client),
      fetchTiles: makeFetchBatch({ pools, guard, roots, metrics }),
      // Histories recorded before run tags call it with the request alone.
      planMosaic: (request: Parameters<typeof planMosaicRun>[0], runTag?: string) => planMosaicRun(request, runTag ?? 'run', roots),
      fetchMosaicBatch: makeMosaicBatch({ pools, guard, roots, metrics }),
      assembleMosaic: (input: Parameters<typeof assembleMosaic>[0]) => assembleMosaic(input, roots, onMosaicEnd),
      loadDeadLetters: (manifestOrOutput: string, sources?: RedriveSources) => loadDeadLetters(manifestOrOutput, sources, roots),
      awaitBreaker: makeAwaitBreaker({ guard }),
      // The workflows schedule these by the contract in src/messages: a drift fails the build here.
    } satisfies BreakerActivities & MosaicActivities & Record<string, ActivityFunction>,
    roots,
    /** The id this process's guard reports under. */
    identity,
    /** Flushes the guard's buffered reports and closes the HTTP pools. */
    async close(): Promise<void> {
      deadLetters.stop();
      await guard.close();
      await pools.close();
    },
  };
}

/** The activities alone (for tests and for workers that manage resources themselves). */
export function createActivities(deps: ActivityDeps) {
  return createActivityRuntime(deps).activities;
}

export type Activities = ReturnType<typeof createActivities>;
