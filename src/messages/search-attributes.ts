// @temporalio/common is the workflow SDK's own Node-free base package (it is what @temporalio/workflow re-exports from).
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes that breaker workflows keep current, so that
 * `temporal workflow list --query 'BreakerState="open"'` lists open breakers.
 * A server must have them registered (`temporal operator search-attribute create`); the dev server started
 * by tilebreaker registers them itself.
 */
export const BREAKER_STATE = defineSearchAttributeKey('BreakerState', SearchAttributeType.KEYWORD);
export const BREAKER_KEY = defineSearchAttributeKey('BreakerKey', SearchAttributeType.KEYWORD);

export const BREAKER_SEARCH_ATTRIBUTES = [BREAKER_STATE, BREAKER_KEY];

/**
 * Search attributes that mosaic (and re-drive) workflows carry, so they can be found and followed in the
 * Temporal UI and by `tilebreaker mosaic list`: set at start by the client, kept current by the workflow at
 * coarse steps (after planning, every 10 % of tiles, at the end), where the namespace has them registered.
 */
export const MOSAIC_NAME = defineSearchAttributeKey('MosaicName', SearchAttributeType.KEYWORD);
export const MOSAIC_SOURCE = defineSearchAttributeKey('MosaicSource', SearchAttributeType.KEYWORD);
export const MOSAIC_ZOOM = defineSearchAttributeKey('MosaicZoom', SearchAttributeType.INT);
/** running, completed (every tile ok), partial (done with gaps), failed, cancelled. */
export const MOSAIC_STATUS = defineSearchAttributeKey('MosaicStatus', SearchAttributeType.KEYWORD);
/** Tiles settled, in percent of the plan (0-100). */
export const MOSAIC_PROGRESS = defineSearchAttributeKey('MosaicProgress', SearchAttributeType.INT);

export const MOSAIC_SEARCH_ATTRIBUTES = [MOSAIC_NAME, MOSAIC_SOURCE, MOSAIC_ZOOM, MOSAIC_STATUS, MOSAIC_PROGRESS];

/** What a namespace's operator service answers about its search attributes (ListSearchAttributes). */
interface SearchAttributeListing {
  listSearchAttributes(req: {
    namespace: string;
  }): Promise<{ customAttributes?: Record<string, unknown> | null; systemAttributes?: Record<string, unknown> | null }>;
}

/** Is every one of `keys` registered in `namespace`? The one check of the client (mosaic starts) and of the activities. */
export async function searchAttributesRegistered(
  operator: SearchAttributeListing,
  namespace: string,
  keys: readonly { name: string }[],
): Promise<boolean> {
  const res = await operator.listSearchAttributes({ namespace });
  const known = new Set([...Object.keys(res.customAttributes ?? {}), ...Object.keys(res.systemAttributes ?? {})]);
  return keys.every((k) => known.has(k.name));
}

/** Every search attribute tilebreaker uses: what its dev servers register. */
export const ALL_SEARCH_ATTRIBUTES = [...BREAKER_SEARCH_ATTRIBUTES, ...MOSAIC_SEARCH_ATTRIBUTES];

/** The statuses MosaicStatus (and the memo's `status`) take. */
export const MOSAIC_STATUSES = ['running', 'completed', 'partial', 'failed', 'cancelled'] as const;
export type MosaicStatusName = (typeof MOSAIC_STATUSES)[number];

/** What a mosaic workflow keeps in its memo (every key optional: runs started before it have none). */
export interface MosaicMemo {
  name?: string;
  source?: string;
  zoom?: number;
  output?: string;
  status?: MosaicStatusName;
  /** Percent of the plan's tiles settled. */
  progress?: number;
  done?: number;
  total?: number;
  /** The schedule whose run started it, if one did. */
  schedule?: string;
}
