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
  /** Where the note that a relative sources file was not checked here goes (default stderr). */
  note?: (line: string) => void;
}

/**
 * Plans a request here, with the planner the worker runs, before anything is started: a zoom outside the
 * source's range, a plan larger than maxTiles or a deadline already past is refused at once (exit 2, the
 * field and value named) instead of by a workflow that fails later, every night for a schedule. Planning
 * only reads: it writes nothing. An absolute sources file missing here is refused, naming where it came from,
 * unless the requester says it lives on the workers only (`sourcesOnWorker`). A relative one is the workers'
 * (each reads it from its first sources root): it is checked here only when this machine has a copy (from
 * the working directory); otherwise the check is the worker's, `note` says so, and 'unchecked' is returned.
 */
export async function preflight(request: MosaicRequest, opts: PreflightOptions = {}): Promise<'checked' | 'unchecked'> {
  return (await preflightPlan(request, opts)) === null ? 'unchecked' : 'checked';
}

/** As `preflight`, with the plan made here (null when the sources file was not read here). */
export async function preflightPlan(request: MosaicRequest, opts: PreflightOptions = {}): Promise<MosaicPlan | null> {
  const given = request.sourcesFile;
  const from = opts.sourcesFrom ?? '--sources';
  if (opts.sourcesOnWorker) {
    if (given === undefined)
      throw new Error(
        '--sources-on-worker: the request names no sources file (--sources FILE or sourcesFile in --request)',
      );
    return null;
  }
  const r = resolveRequestPaths(request);
  if (given !== undefined && !existsSync(path.resolve(given))) {
    if (!path.isAbsolute(given)) {
      const note = opts.note ?? ((line: string) => void process.stderr.write(`tilebreaker: ${line}\n`));
      note(
        `${from} ${JSON.stringify(given)}: no copy on this machine, so the request was not checked here; the workers read it from their first sources root and check it when the run starts`,
      );
      return null;
    }
    throw new Error(
      `${from} ${JSON.stringify(given)}: no such file on this machine, so nothing was started. ` +
        'Give the path of a sources file this machine can read (the workers read the same path: mount it at the same place on both, or give a path relative to their first sources root), ' +
        'or, for a file that exists only on the workers, add --sources-on-worker with the path as they see it; the workers then check it when the mosaic starts.',
    );
  }
  return planMosaic(r);
}
