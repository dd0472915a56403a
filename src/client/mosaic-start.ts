import {
  WorkflowExecutionAlreadyStartedError,
  type Client,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { capabilitiesFor } from '../messages/locations';
import { parseMosaicRequest } from '../messages/mosaic-request';
import type { mosaicWorkflow } from '../workflows/mosaic';
import type { MosaicRequest } from '../messages/mosaic-types';
import { checkMosaicName, defaultMosaicName } from '../messages/mosaic-names';
import type { MosaicMemo } from '../messages/search-attributes';
import {
  legacyMosaicWorkflowId,
  legacyRedriveWorkflowId,
  mosaicAttributesRegistered,
  mosaicWorkflowId,
  normalLocation,
  redriveWorkflowId,
  seedLevelOf,
  seedWorkflowId,
  startLabels,
} from './mosaic-names';

/**
 * Paths in a request are the caller's: the output and store are resolved here (normalLocation: one spelling
 * of one place, as its id is), before a worker elsewhere writes them. A relative sourcesFile is sent as
 * written: each worker reads it from its own first sources root, so the file need not sit at one absolute
 * path on every host.
 */
export function resolveRequestPaths(request: MosaicRequest, cwd = process.cwd()): MosaicRequest {
  const local = (p: string) => normalLocation(p, cwd);
  // Named only when needed: a worker of the release before object storage refuses it rather than write locally.
  const requires = capabilitiesFor([request.output, request.storeRoot]);
  return {
    ...request,
    ...(requires.length ? { requires: [...new Set([...(request.requires ?? []), ...requires])] } : {}),
    output: local(request.output),
    ...(request.storeRoot !== undefined ? { storeRoot: local(request.storeRoot) } : {}),
  };
}

export interface StartMosaicOptions {
  /** Workflow id (default: from the output, mosaicWorkflowId). */
  workflowId?: string;
  /** The mosaic's name (default: the output's base name without extension). */
  name?: string;
}

/** Another run of the same output is running: the second start is refused. */
export class MosaicAlreadyRunningError extends Error {
  constructor(
    readonly workflowId: string,
    output: string,
    options?: ErrorOptions & { holder?: string | undefined },
  ) {
    super(
      `a mosaic of ${output} is already running as ${workflowId}${options?.holder ? ` (${options.holder})` : ''}; follow it with: tilebreaker mosaic watch ${workflowId} (or cancel it first)`,
      options,
    );
    this.name = 'MosaicAlreadyRunningError';
  }
}

/**
 * Starts a mosaic workflow. The request is validated here first (the worker validates it again with the
 * sources file as it is when the run starts), so a typo fails at once with the field and value named. The
 * id comes from the output (one run of an output at a time, see mosaic-names.ts; a schedule's run and a
 * re-drive take the same id); the name, source and zoom go into the memo and, where registered, the Mosaic*
 * search attributes.
 */
export async function startMosaic(
  client: Client,
  taskQueue: string,
  request: MosaicRequest,
  idOrOptions?: string | StartMosaicOptions,
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof mosaicWorkflow>> {
  const opts: StartMosaicOptions = typeof idOrOptions === 'string' ? { workflowId: idOrOptions } : (idOrOptions ?? {});
  const resolved = resolveRequestPaths(request);
  parseMosaicRequest(resolved);
  const name = opts.name !== undefined ? checkMosaicName(opts.name, '--name') : defaultMosaicName(resolved.output);
  const workflowId = opts.workflowId ?? mosaicWorkflowId(resolved.output);
  await refuseOtherRuns(client, resolved.output, workflowId);
  const labels = startLabels(
    { name, source: resolved.sourceName ?? 'inline', zoom: resolved.zoom, output: resolved.output },
    await mosaicAttributesRegistered(client),
  );
  try {
    // FAIL (the default, said here): the run holding the id goes on, whoever started it, and this start is refused.
    return await client.workflow.start<typeof mosaicWorkflow>('mosaicWorkflow', {
      taskQueue,
      workflowId,
      args: [resolved],
      workflowIdConflictPolicy: 'FAIL',
      ...labels,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      throw new MosaicAlreadyRunningError(workflowId, resolved.output, {
        cause: err,
        holder: await holderOf(client, workflowId),
      });
    throw err;
  }
}

/** Refuses a start while the output runs under another of its ids (MosaicAlreadyRunningError). */
async function refuseOtherRuns(client: Client, output: string, workflowId: string): Promise<void> {
  // Runs under other ids of this output: a path-style id (before names), a re-drive's own id, a seed's level (or its re-drive).
  const level = seedLevelOf(output);
  const others = [legacyMosaicWorkflowId(output), redriveWorkflowId(output), legacyRedriveWorkflowId(output)];
  if (level) others.push(`${seedWorkflowId(level.into)}/z${level.zoom}`);
  for (const old of others) {
    if (old !== workflowId && (await runningStatus(client, old)))
      throw new MosaicAlreadyRunningError(old, output, { holder: await holderOf(client, old) });
  }
}

async function runningStatus(client: Client, workflowId: string): Promise<boolean> {
  return client.workflow
    .getHandle(workflowId)
    .describe()
    .then((d) => d.status.name === 'RUNNING')
    .catch(() => false);
}

/** Who runs under an output's id, for the refusal: a re-drive, a schedule's run, or nothing to add (a start by hand). */
async function holderOf(client: Client, workflowId: string): Promise<string | undefined> {
  const desc = await client.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => null);
  if (!desc) return undefined;
  if (desc.type === 'redriveMosaicWorkflow') return 'a re-drive';
  const schedule = (desc.memo as MosaicMemo | undefined)?.schedule;
  return typeof schedule === 'string' ? `started by schedule ${schedule}` : undefined;
}
