import { existsSync } from 'node:fs';
import { planMosaic } from '../activities/mosaic/plan';
import { resolveRequestPaths } from '../client/mosaics';
import type { MosaicRequest } from '../messages/mosaic-types';

/**
 * Plans a request here, with the planner the worker runs, before anything is started: a zoom outside the
 * source's range, a plan larger than maxTiles or a deadline already past is refused at once (exit 2, the
 * field and value named) instead of by a workflow that fails later, every night for a schedule. Planning
 * only reads: it writes nothing. A sources file this machine does not have (it lives on the workers) leaves
 * the source's checks to the worker: 'unchecked' says so.
 */
export async function preflight(request: MosaicRequest): Promise<'checked' | 'unchecked'> {
  const r = resolveRequestPaths(request);
  if (r.sourcesFile !== undefined && !existsSync(r.sourcesFile)) return 'unchecked';
  await planMosaic(r);
  return 'checked';
}
