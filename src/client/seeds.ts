import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { capabilitiesFor } from '../messages/locations';
import { parseMosaicRequest } from '../messages/mosaic-request';
import { checkSeedRequest, type SeedRequest, type SeedResult } from '../messages/seed-types';
import type { seedWorkflow } from '../workflows/seed';
import { normalLocation, seedWorkflowId } from './mosaic-names';
import { EXIT, exitCodeFor } from './mosaics';

export { seedWorkflowId } from './mosaic-names';

/** The seed as a worker will get it: paths resolved here (as `mosaic start` resolves them), checked before anything starts. */
export function prepareSeed(request: SeedRequest): SeedRequest {
  // One spelling of one place (so one id); a relative sourcesFile goes as written, for the worker's sources root.
  const local = (p: string) => normalLocation(p);
  const resolved: SeedRequest = {
    ...request,
    into: local(request.into),
    ...(request.storeRoot !== undefined ? { storeRoot: local(request.storeRoot) } : {}),
  };
  // A worker of a release before object storage refuses the levels instead of writing locally.
  const requires = capabilitiesFor([resolved.into, resolved.storeRoot]);
  if (requires.length) resolved.requires = [...new Set([...(resolved.requires ?? []), ...requires])];
  const { levels, base } = checkSeedRequest(resolved);
  // Each level is a mosaic request: a bad bbox, fallback or deadline is refused here, before any level runs.
  const { levels: _l, into: _i, ...mosaic } = resolved;
  parseMosaicRequest({ ...mosaic, zoom: levels.at(-1)!, output: `${base}.z${levels.at(-1)!}.tif`, image: false });
  return resolved;
}

/** Starts a seed, one per file at a time (its id is the file's). */
export async function startSeed(
  client: Client,
  taskQueue: string,
  request: SeedRequest,
  workflowId?: string,
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof seedWorkflow>> {
  const resolved = prepareSeed(request);
  return client.workflow.start<typeof seedWorkflow>('seedWorkflow', {
    taskQueue,
    workflowId: workflowId ?? seedWorkflowId(resolved.into),
    args: [resolved],
    workflowIdConflictPolicy: 'FAIL',
  });
}

/** A seed's exit code: a level's configuration error first, then gaps in any level, else 0. */
export function seedExitCode(result: SeedResult): number {
  const codes = result.levels.map(exitCodeFor);
  if (result.notStarted.length > 0 || result.missing > 0) codes.push(EXIT.gaps);
  if (codes.includes(EXIT.configError)) return EXIT.configError;
  return codes.every((c) => c === EXIT.ok) ? EXIT.ok : EXIT.gaps;
}
