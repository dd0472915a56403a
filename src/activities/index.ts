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
 * Every activity the tilebreaker worker registers, built from its dependencies. One connection pool set and
 * one breaker guard per worker process, shared by every activity it runs.
 */
export function createActivities(deps: ActivityDeps) {
  const pools = new EndpointPools();
  const guard = new BreakerGuard({ client: deps.client, taskQueue: deps.taskQueue, reporter: `worker-${process.pid}` });
  return {
    probeEndpoint,
    breakerSearchAttributesRegistered: makeSearchAttributeCheck(deps.client),
    fetchTiles: makeFetchBatch({ pools, guard }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
