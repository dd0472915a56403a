import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { BREAKER_SEARCH_ATTRIBUTES, MOSAIC_SEARCH_ATTRIBUTES } from '../messages/search-attributes';

/** Are all of `names` registered in this activity's namespace? */
async function registered(client: Client, names: string[]): Promise<boolean> {
  const { namespace } = Context.current().info;
  const res = await client.connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set([...Object.keys(res.customAttributes ?? {}), ...Object.keys(res.systemAttributes ?? {})]);
  return names.every((name) => known.has(name));
}

/**
 * Is every breaker search attribute registered in this worker's namespace? Asked once per entity (and
 * carried across continue-as-new): upserting an unregistered attribute would fail every workflow task.
 */
export function makeSearchAttributeCheck(client: Client) {
  const names = BREAKER_SEARCH_ATTRIBUTES.map((k) => k.name);
  return async function breakerSearchAttributesRegistered(): Promise<boolean> {
    return registered(client, names);
  };
}

/** The same check for the mosaic attributes, asked once by a mosaic started without them. */
export function makeMosaicSearchAttributeCheck(client: Client) {
  const names = MOSAIC_SEARCH_ATTRIBUTES.map((k) => k.name);
  return async function mosaicSearchAttributesRegistered(): Promise<boolean> {
    return registered(client, names);
  };
}
