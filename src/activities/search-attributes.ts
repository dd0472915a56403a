import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { BREAKER_SEARCH_ATTRIBUTES } from '../messages/search-attributes';

/** The names the breaker entity keeps current. */
const NEEDED = BREAKER_SEARCH_ATTRIBUTES.map((k) => k.name);

/**
 * Is every breaker search attribute registered in this worker's namespace? Asked once per entity (and
 * carried across continue-as-new): upserting an unregistered attribute would fail every workflow task.
 */
export function makeSearchAttributeCheck(client: Client) {
  return async function breakerSearchAttributesRegistered(): Promise<boolean> {
    const { namespace } = Context.current().info;
    const res = await client.connection.operatorService.listSearchAttributes({ namespace });
    const known = new Set([...Object.keys(res.customAttributes ?? {}), ...Object.keys(res.systemAttributes ?? {})]);
    return NEEDED.every((name) => known.has(name));
  };
}
