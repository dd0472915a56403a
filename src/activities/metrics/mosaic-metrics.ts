import type { BreakerStateName } from '../../breaker';
import type { FallbackTier, MosaicFinish } from '../../messages/metrics';
import type { ManifestStatus, ManifestTile } from '../../messages/mosaic-types';

/**
 * The fallback that decided a tile's final status, if any: a stale copy, a hole the breaker's refusal left
 * (a 404's hole is the server's answer, not a fallback), or a dead letter.
 */
export function fallbackTier(status: ManifestStatus, breakerState: BreakerStateName | undefined): FallbackTier | null {
  if (status === 'stale') return 'stale';
  if (status === 'dead-lettered') return 'dead-letter';
  if (status === 'hole' && breakerState !== undefined) return 'hole';
  return null;
}

/**
 * How a mosaic run ended: `failed` when it stopped early (failed or cancelled: a partial manifest),
 * `deadline-missed` when it was assembled after its deadline, `gaps` when a tile is dead-lettered, failed,
 * or a hole the breaker left, else `complete` (stale tiles and 404 holes included).
 */
export function mosaicFinish(run: { partial: boolean; deadlineAt: number | null; now: number; tiles: readonly ManifestTile[] }): MosaicFinish {
  if (run.partial) return 'failed';
  if (run.deadlineAt !== null && run.now > run.deadlineAt) return 'deadline-missed';
  const gap = run.tiles.some((t) => t.status === 'dead-lettered' || t.status === 'failed' || (t.status === 'hole' && t.breakerState !== undefined));
  return gap ? 'gaps' : 'complete';
}
