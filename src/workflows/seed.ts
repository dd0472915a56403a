import { ApplicationFailure, executeChild, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { SeedActivities } from '../messages/activities';
import type { MosaicResult } from '../messages/mosaic-types';
import { durationMs } from '../messages/duration';
import { checkSeedRequest, type SeedRequest, type SeedResult } from '../messages/seed-types';
import { mosaicWorkflow } from './mosaic';

const { packMbtiles } = proxyActivities<SeedActivities>({
  startToCloseTimeout: '6h',
  // The pack heartbeats after each chunk of tiles: a lost worker's pack is retried within minutes.
  heartbeatTimeout: '2m',
  retry: { initialInterval: '5s', maximumAttempts: 3, nonRetryableErrorTypes: ['ConfigError'] },
});

/**
 * Seeds a tile cache over a range of zoom levels: each level, from the first to the last, runs as a mosaic
 * child workflow (`<seed id>/z<level>`) that fetches its tiles into the tile store through the fleet-wide
 * breaker, with the request's fallback, and writes its manifest and mask but no image; then the served tiles
 * of every level are packed into the MBTiles file `into`. A level's dead letters are re-driven as a mosaic's
 * are (`mosaic redrive <into minus .mbtiles>.z<level>.manifest.json`), and a seed started again packs anew.
 */
export async function seedWorkflow(request: SeedRequest): Promise<SeedResult> {
  let checked: { levels: number[]; base: string };
  try {
    checked = checkSeedRequest(request);
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'ConfigError');
  }
  const { levels: _levels, into, ...mosaic } = request;
  const storeRoot = request.storeRoot ?? `${checked.base}.tiles`;
  // One deadline for the whole seed: a duration counts from the seed's start, not from each level's.
  const ms = request.deadline !== undefined ? durationMs(request.deadline) : null;
  const deadline = ms !== null ? new Date(Date.now() + ms).toISOString() : request.deadline;
  const results: MosaicResult[] = [];
  const notStarted: number[] = [];
  for (const zoom of checked.levels) {
    // Past the deadline a level's plan would be refused: the levels left are not seeded, and said so.
    if (deadline !== undefined && Date.now() >= Date.parse(deadline)) {
      notStarted.push(zoom);
      continue;
    }
    const result = await executeChild(mosaicWorkflow, {
      workflowId: `${workflowInfo().workflowId}/z${zoom}`,
      args: [{ ...mosaic, ...(deadline !== undefined ? { deadline } : {}), storeRoot, zoom, output: `${checked.base}.z${zoom}.tif`, image: false }],
    });
    results.push(result);
    // The source needs fixing: the next levels would meet the same error. What was served is packed.
    if (result.configError !== undefined) break;
  }
  if (results.length === 0) throw ApplicationFailure.nonRetryable(`seed: the deadline ${deadline} passed before the first level started`, 'DeadlinePassed');
  const packed = await packMbtiles({ into, outputs: results.map((r) => r.output), name: request.sourceName ?? 'tilebreaker seed' });
  return { into: packed.into, tiles: packed.tiles, levels: results, notStarted, missing: packed.missing };
}
