import { ApplicationFailure, executeChild, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { SeedActivities } from '../messages/activities';
import type { MosaicResult } from '../messages/mosaic-types';
import { checkSeedRequest, type SeedRequest, type SeedResult } from '../messages/seed-types';
import { mosaicWorkflow } from './mosaic';

const { packMbtiles } = proxyActivities<SeedActivities>({
  startToCloseTimeout: '2h',
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
  const results: MosaicResult[] = [];
  for (const zoom of checked.levels) {
    results.push(
      await executeChild(mosaicWorkflow, {
        workflowId: `${workflowInfo().workflowId}/z${zoom}`,
        args: [{ ...mosaic, storeRoot, zoom, output: `${checked.base}.z${zoom}.tif`, image: false }],
      }),
    );
  }
  const packed = await packMbtiles({ into, outputs: results.map((r) => r.output), name: request.sourceName ?? 'tilebreaker seed' });
  return { into: packed.into, tiles: packed.tiles, levels: results };
}
