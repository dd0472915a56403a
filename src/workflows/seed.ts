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

/** Levels whose mosaics run at the same time. */
const LEVELS_AT_ONCE = 3;

/**
 * Seeds a tile cache over a range of zoom levels: each level, from the first to the last, up to three at a time, runs as a mosaic
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
  // Up to three levels run at once: the source's connection slots (per worker process and origin) bound what
  // reaches the server either way, and one level's planning, tail and assembly overlap another's fetches.
  const atOnce = LEVELS_AT_ONCE;
  const byLevel = new Map<number, MosaicResult>();
  const failures = new Map<number, unknown>();
  const notStarted: number[] = [];
  let stopped = false;
  let next = 0;
  const runLevels = async (): Promise<void> => {
    while (next < checked.levels.length && !stopped) {
      const zoom = checked.levels[next++]!;
      // Past the deadline a level's plan would be refused: the levels left are not seeded, and said so.
      if (deadline !== undefined && Date.now() >= Date.parse(deadline)) {
        notStarted.push(zoom);
        continue;
      }
      let result: MosaicResult;
      try {
        result = await executeChild(mosaicWorkflow, {
          workflowId: `${workflowInfo().workflowId}/z${zoom}`,
          args: [
            {
              ...mosaic,
              ...(deadline !== undefined ? { deadline } : {}),
              storeRoot,
              zoom,
              output: `${checked.base}.z${zoom}.tif`,
              image: false,
            },
          ],
        });
      } catch (err) {
        // No level starts after a failed one; those running finish, then the first level's failure is the seed's.
        failures.set(zoom, err);
        stopped = true;
        return;
      }
      byLevel.set(zoom, result);
      // The source needs fixing: the next levels would meet the same error. What was served is packed.
      if (result.configError !== undefined) stopped = true;
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, checked.levels.length) }, runLevels));
  if (failures.size > 0) throw failures.get(Math.min(...failures.keys()));
  const results = checked.levels.filter((z) => byLevel.has(z)).map((z) => byLevel.get(z)!);
  if (results.length === 0)
    throw ApplicationFailure.nonRetryable(
      `seed: the deadline ${deadline} passed before the first level started`,
      'DeadlinePassed',
    );
  const packed = await packMbtiles({
    into,
    outputs: results.map((r) => r.output),
    name: request.sourceName ?? 'tilebreaker seed',
  });
  return {
    into: packed.into,
    tiles: packed.tiles,
    ...(packed.kept !== undefined ? { kept: packed.kept } : {}),
    ...(packed.earlierNotKept !== undefined ? { earlierNotKept: packed.earlierNotKept } : {}),
    levels: results,
    notStarted,
    missing: packed.missing,
  };
}
