import { existsSync } from 'node:fs';
import path from 'node:path';
import { planMosaic } from '../activities/mosaic/plan';
import { resolveRequestPaths } from '../client/mosaics';
import type { MosaicPlan, MosaicRequest } from '../messages/mosaic-types';

export interface PreflightOptions {
  /** The sources file is a path on the workers only: nothing is read here, the worker checks it all. */
  sourcesOnWorker?: boolean;
  /** Where the request's sourcesFile came from, for messages: `--sources` or `sourcesFile in --request x.yaml`. */
  sourcesFrom?: string;
}

/**
 * Plans a request here, with the planner the worker runs, before anything is started: a zoom outside the
 * source's range, a plan larger than maxTiles or a deadline already past is refused at once (exit 2, the
 * field and value named) instead of by a workflow that fails later, every night for a schedule. Planning
 * only reads: it writes nothing. A sources file missing here is refused, naming where it came from, unless
 * the requester says it lives on the workers only (`sourcesOnWorker`): then the source's checks are the
 * worker's, and 'unchecked' says so.
 */
export async function preflight(request: MosaicRequest, opts: PreflightOptions = {}): Promise<'checked' | 'unchecked'> {
  return (await preflightPlan(request, opts)) === null ? 'unchecked' : 'checked';
}

/** As `preflight`, with the plan made here (null when the sources file lives on the workers only). */
export async function preflightPlan(request: MosaicRequest, opts: PreflightOptions = {}): Promise<MosaicPlan | null> {
  const given = request.sourcesFile;
  const from = opts.sourcesFrom ?? '--sources';
  if (opts.sourcesOnWorker) {
    if (given === undefined) throw new Error('--sources-on-worker: the request names no sources file (--sources FILE or sourcesFile in --request)');
    // Resolved here, a relative path would name a file in this machine's working directory, not the workers'.
    if (!path.isAbsolute(given)) {
      throw new Error(`${from} ${JSON.stringify(given)}: with --sources-on-worker, give the path as the workers see it, absolute (e.g. /config/${path.basename(given)})`);
    }
    return null;
  }
  const r = resolveRequestPaths(request);
  if (r.sourcesFile !== undefined && !existsSync(r.sourcesFile)) {
    throw new Error(
      `${from} ${JSON.stringify(given)}: no such file on this machine${r.sourcesFile !== given ? ` (${r.sourcesFile})` : ''}, so nothing was started. ` +
        'Give the path of a sources file this machine can read (the workers read the same path: mount it at the same place on both), ' +
        'or, for a file that exists only on the workers, add --sources-on-worker with the path as they see it; the workers then check it when the mosaic starts.',
    );
  }
  return planMosaic(r);
}
