import { readFileSync } from 'node:fs';
import {
  WorkflowExecutionAlreadyStartedError,
  type Client,
  type WorkflowExecutionDescription,
} from '@temporalio/client';
import type { RedriveSources } from '../messages/mosaic-types';
import { defaultMosaicName, isMosaicName } from '../messages/mosaic-names';
import type { MosaicMemo } from '../messages/search-attributes';
import {
  legacyMosaicWorkflowId,
  legacyRedriveWorkflowId,
  mosaicAttributesRegistered,
  mosaicWorkflowId,
  normalLocation,
  outputKey,
  redriveWorkflowId,
  seedLevelOf,
  seedWorkflowId,
  startLabels,
} from './mosaic-names';

/**
 * The id of the seed level an output is, which a re-drive of it takes, so that the level (run again by its seed)
 * and the re-drive never run at once, write the same journals or clear each other's: the id its manifest
 * records where that is a level's, else `<seed id>/z<level>` (the id a seed of that file gives the level) where
 * Temporal knows a run of it. Null for an output no seed has run as a level.
 */
async function seedLevelId(client: Client, abs: string, recorded: string | undefined): Promise<string | null> {
  const level = seedLevelOf(abs);
  if (!level) return null;
  if (recorded?.endsWith(`/z${level.zoom}`)) return recorded;
  const id = `${seedWorkflowId(level.into)}/z${level.zoom}`;
  const known = await client.workflow
    .getHandle(id)
    .describe()
    .then(
      () => true,
      () => false,
    );
  return known ? id : null;
}

/** A re-drive refused because `id` runs: what runs there, and what to do. */
function redriveRefusal(id: string, desc: WorkflowExecutionDescription | null, options?: ErrorOptions): Error {
  if (desc?.type === 'redriveMosaicWorkflow')
    return new Error(
      `a re-drive of this mosaic is already running as ${id}; follow it with: tilebreaker mosaic watch ${id}`,
      options,
    );
  const schedule = (desc?.memo as MosaicMemo | undefined)?.schedule;
  const parent = desc?.parentExecution?.workflowId;
  const by =
    typeof schedule === 'string'
      ? ` (started by schedule ${schedule})`
      : parent?.startsWith('seed/')
        ? ` (a level of seed ${parent})`
        : '';
  return new Error(
    `mosaic ${id}${by} is still running; re-drive it once it has finished, or cancel it first (tilebreaker mosaic cancel ${id})`,
    options,
  );
}

/**
 * Starts a re-drive of a mosaic's dead letters under the output's id, the id of the mosaic itself and of a
 * schedule's run of it: refused while any of them runs (they would write the same journals), atomically by
 * Temporal, and checked first for the ids earlier versions used. A seed level's re-drive takes the level's id,
 * `<seed id>/z<level>` (seedLevelId), so its seed run again and the re-drive refuse each other the same way. It waits up to `waitForMs` (default
 * DEFAULT_REDRIVE_WAIT_MS) for the breaker to let the tiles through.
 */
export async function startRedrive(
  client: Client,
  taskQueue: string,
  manifestOrOutput: string,
  workflowId?: string,
  sources?: RedriveSources,
  opts: { waitForMs?: number; replaceMirrors?: boolean } = {},
): Promise<string> {
  if (opts.waitForMs !== undefined && !(Number.isFinite(opts.waitForMs) && opts.waitForMs > 0))
    throw new Error(`waitForMs: must be a positive number of ms (got ${opts.waitForMs})`);
  const abs = normalLocation(manifestOrOutput);
  const recorded = recordedWorkflowId(abs);
  const id = workflowId ?? (await seedLevelId(client, abs, recorded)) ?? mosaicWorkflowId(abs);
  // The output's id first (its latest run's memo labels the re-drive), then those of earlier versions' runs.
  const candidates = new Set([
    mosaicWorkflowId(abs),
    legacyMosaicWorkflowId(abs),
    redriveWorkflowId(abs),
    legacyRedriveWorkflowId(abs),
    id,
  ]);
  if (recorded !== undefined) candidates.add(recorded);
  const memo = await memoWhileNoneRuns(client, candidates);
  const name = typeof memo.name === 'string' && isMosaicName(memo.name) ? memo.name : defaultMosaicName(abs);
  const labels = startLabels(
    { name, source: memo.source ?? 'unknown', zoom: memo.zoom, output: memo.output ?? `${outputKey(abs)}.tif` },
    await mosaicAttributesRegistered(client),
  );
  try {
    await client.workflow.start('redriveMosaicWorkflow', {
      taskQueue,
      workflowId: id,
      args: [
        {
          manifest: abs,
          // As written: a relative file is read from the worker's first sources root.
          ...(sources ? { sources } : {}),
          ...(opts.waitForMs !== undefined ? { waitForMs: opts.waitForMs } : {}),
          ...(opts.replaceMirrors ? { replaceMirrors: true } : {}),
        },
      ],
      // A run that took the id since the check above (a schedule's, one by hand) goes on; this start is refused.
      workflowIdConflictPolicy: 'FAIL',
      ...labels,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      const desc = await client.workflow
        .getHandle(id)
        .describe()
        .catch(() => null);
      throw redriveRefusal(id, desc, { cause: err });
    }
    throw err;
  }
  return id;
}

/** The workflow id the output's manifest records, when a manifest is readable here. */
function recordedWorkflowId(abs: string): string | undefined {
  try {
    const m = JSON.parse(readFileSync(`${outputKey(abs)}.manifest.json`, 'utf8')) as { workflowId?: string | null };
    if (typeof m.workflowId === 'string' && m.workflowId) return m.workflowId;
  } catch {
    // No manifest readable here (a bucket, another machine's disk, or the mosaic has not assembled yet): the default ids are checked.
  }
  return undefined;
}

/**
 * Refuses the re-drive (redriveRefusal) when a run holds any of `ids`; else the memo of the first of them
 * Temporal knows, which labels the re-drive (empty when none is known).
 */
async function memoWhileNoneRuns(client: Client, ids: Iterable<string>): Promise<MosaicMemo> {
  let memo: MosaicMemo = {};
  for (const c of ids) {
    const desc = await client.workflow
      .getHandle(c)
      .describe()
      .catch(() => null);
    if (desc?.status.name === 'RUNNING') throw redriveRefusal(c, desc);
    if (desc && memo.name === undefined) memo = desc.memo ?? {};
  }
  return memo;
}
