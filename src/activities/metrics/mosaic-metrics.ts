import type { BreakerStateName } from '../../breaker';
import type { FallbackTier, MosaicFinish } from '../../messages/metrics';
import type { ManifestStatus, ManifestTile, StatusCounts } from '../../messages/mosaic-types';
import type { DeadLetterWatch } from './dead-letter-watch';
import type { WorkerMetrics } from './worker-metrics';

/** How a mosaic run ended, for its metrics. */
export interface MosaicEnd {
  /** The `mosaic` label: the output path, which a mosaic and its re-drives share. */
  mosaic: string;
  manifest: string;
  result: MosaicFinish;
  counts: StatusCounts;
}

/** What the assembly calls at a run's end: the counters, and the dead letters gauge (kept current by `watch`). */
export function mosaicEndMetrics(metrics: WorkerMetrics, watch: DeadLetterWatch): (end: MosaicEnd) => Promise<void> {
  return async (end) => {
    metrics.mosaicFinished(end.mosaic, end.result, end.counts);
    await watch.finished(end.mosaic, end.manifest, end.counts['dead-lettered']);
  };
}

/**
 * The fallback that decided a tile's final status, if any: a mirror, a stale copy, a hole the breaker's refusal left
 * (a 404's hole is the server's answer, not a fallback), or a dead letter.
 */
export function fallbackTier(
  status: ManifestStatus,
  breakerState: BreakerStateName | undefined,
  tier?: string,
): FallbackTier | null {
  if (status === 'ok') return tier?.startsWith('mirror:') ? 'mirror' : null;
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
export function mosaicFinish(run: {
  partial: boolean;
  deadlineAt: number | null;
  now: number;
  tiles: readonly ManifestTile[];
}): MosaicFinish {
  if (run.partial) return 'failed';
  if (run.deadlineAt !== null && run.now > run.deadlineAt) return 'deadline-missed';
  const gap = run.tiles.some(
    (t) =>
      t.status === 'dead-lettered' || t.status === 'failed' || (t.status === 'hole' && t.breakerState !== undefined),
  );
  return gap ? 'gaps' : 'complete';
}
