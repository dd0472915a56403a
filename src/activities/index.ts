import type { Client } from '@temporalio/client';
import { makeFetchBatch } from './fetch/fetch-batch';
import { BreakerGuard } from './guard';
import { EndpointPools } from './http/endpoint-pool';
import { probeEndpoint } from './probe';
import { makeSearchAttributeCheck } from './search-attributes';

export interface ActivityDeps {
  /** A client of the worker's own Temporal namespace (for the search-attribute check, guards, signals). */
  client: Client;
  /** The task queue breaker entities run on (this worker's). */
  taskQueue: string;
}

/**
 * Every activity the tilebreaker worker registers, built from its dependencies, and `close()` for what they
 * share: one connection pool set and one breaker guard per worker process.
 */
export function createActivityRuntime(deps: ActivityDeps) {
  const pools = new EndpointPools();
  const guard = new BreakerGuard({ client: deps.client, taskQueue: deps.taskQueue, reporter: `worker-${process.pid}` });
  return {
    activities: {
      probeEndpoint,
      breakerSearchAttributesRegistered: makeSearchAttributeCheck(deps.client),
      fetchTiles: makeFetchBatch({ pools, guard }),
    },
    /** Flushes the guard's buffered reports and closes the HTTP pools. */
    async close(): Promise<void> {
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
