import type { Client } from '@temporalio/client';
import { probeEndpoint } from './probe';
import { makeSearchAttributeCheck } from './search-attributes';

export interface ActivityDeps {
  /** A client of the worker's own Temporal namespace (for the search-attribute check, guards, signals). */
  client: Client;
}

/** Every activity the tilebreaker worker registers, built from its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    probeEndpoint,
    breakerSearchAttributesRegistered: makeSearchAttributeCheck(deps.client),
  };
}

export type Activities = ReturnType<typeof createActivities>;
