import type { StoredTile, Tiles } from '../tile-store/tiles';
import type { FetchBatchInput, TileResult } from './batch-types';

/** A unit's tiles to keep from the store if it holds them all fresh enough, and where to record them. */
export interface KeepFresh {
  store: Tiles;
  input: FetchBatchInput;
  /** The unit's tiles: positions in the batch. */
  members: number[];
  /** The oldest fetchedAt (epoch ms) kept. */
  since: number;
  results: (TileResult | null)[];
  /** Why they are kept, for their reason. */
  why: string;
}

/**
 * Refresh mode, or a retry: the unit's tiles as the store holds them, when every one was fetched at or after
 * `since` (a metatile is kept only whole, as it is fetched whole). True when they were recorded ok with no
 * request, `why` in their reason.
 */
export async function keptFresh({ store, input, members, since, results, why }: KeepFresh): Promise<boolean> {
  let stored: (StoredTile | null)[];
  try {
    stored = await Promise.all(members.map((i) => store.get(input.sourceName, input.tiles[i]!)));
  } catch {
    // A folder that leads out of the store, an unreadable file: fetched instead, where the store's write says why.
    return false;
  }
  // A copy of another size (the source's tileSize changed since) is not this source's tile.
  const fits = (s: StoredTile) =>
    s.meta.width === undefined || (s.meta.width === input.source.tileSize && s.meta.height === input.source.tileSize);
  if (!stored.every((s) => s !== null && s.meta.fetchedAt >= since && fits(s))) return false;
  members.forEach((i, k) => {
    const s = stored[k]!;
    results[i] = {
      ...input.tiles[i]!,
      status: 'ok',
      reason: `kept: in the store since ${new Date(s.meta.fetchedAt).toISOString()}, ${why}`,
      attempts: 0,
      path: s.path,
      bytes: s.meta.bytes,
    };
  });
  return true;
}
