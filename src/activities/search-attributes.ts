import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  BREAKER_SEARCH_ATTRIBUTES,
  MOSAIC_SEARCH_ATTRIBUTES,
  searchAttributesRegistered,
} from '../messages/search-attributes';

/** Are all of `keys` registered in this activity's namespace? */
function registered(client: Client, keys: readonly { name: string }[]): Promise<boolean> {
  return searchAttributesRegistered(client.connection.operatorService, Context.current().info.namespace, keys);
}

/**
 * Is every breaker search attribute registered in this worker's namespace? Asked once per entity (and
 * carried across continue-as-new): upserting an unregistered attribute would fail every workflow task.
 */
export function makeSearchAttributeCheck(client: Client) {
  return async function breakerSearchAttributesRegistered(): Promise<boolean> {
    return registered(client, BREAKER_SEARCH_ATTRIBUTES);
  };
}

/** The same check for the mosaic attributes, asked once by a mosaic started without them. */
export function makeMosaicSearchAttributeCheck(client: Client) {
  return async function mosaicSearchAttributesRegistered(): Promise<boolean> {
    return registered(client, MOSAIC_SEARCH_ATTRIBUTES);
  };
}
