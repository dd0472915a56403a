import { readFileSync } from 'node:fs';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowExecutionDescription,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { capabilitiesFor } from '../messages/locations';
import { parseMosaicRequest } from '../messages/mosaic-request';
import type { mosaicWorkflow } from '../workflows/mosaic';
import { progressQuery } from '../messages/mosaic';
import {
  allServed,
  type MosaicProgress,
  type MosaicRequest,
  type MosaicResult,
  type RedriveSources,
} from '../messages/mosaic-types';
import { checkMosaicName, defaultMosaicName, isMosaicName } from '../messages/mosaic-names';
import type { MosaicMemo } from '../messages/search-attributes';
import { throughOutages, type OutageOptions } from './server-wait';
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

export { mosaicWorkflowId } from './mosaic-names';

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
  // Runs under other ids of this output: a path-style id (before names), a re-drive's own id, a seed's level (or its re-drive).
  const level = seedLevelOf(resolved.output);
  const others = [
    legacyMosaicWorkflowId(resolved.output),
    redriveWorkflowId(resolved.output),
    legacyRedriveWorkflowId(resolved.output),
  ];
  if (level) others.push(`${seedWorkflowId(level.into)}/z${level.zoom}`);
  for (const old of others) {
    if (old !== workflowId && (await runningStatus(client, old)))
      throw new MosaicAlreadyRunningError(old, resolved.output, { holder: await holderOf(client, old) });
  }
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

export interface MosaicStatus {
  workflowId: string;
  runId: string;
  status: string;
  progress: MosaicProgress | null;
  /** Live counts of the running child block, when there is one. */
  blockProgress: MosaicProgress | null;
  result: MosaicResult | null;
  failure: string | null;
  /** The failure's application error type, e.g. ConfigError for a request refused at planning. */
  failureType: string | null;
}

/** A mosaic's state: the workflow's status, its progress (and its running block's), and its result once done. */
export async function mosaicStatus(client: Client, workflowId: string): Promise<MosaicStatus> {
  const handle = client.workflow.getHandle(workflowId);
  let desc;
  try {
    desc = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new Error(`no mosaic workflow with id ${JSON.stringify(workflowId)}`, { cause: err });
    throw err;
  }
  const status = desc.status.name;
  const progress = await handle.query(progressQuery).catch(() => null);
  let blockProgress: MosaicProgress | null = null;
  const block = progress?.runningBlocks[0];
  if (block && status === 'RUNNING')
    blockProgress = await client.workflow
      .getHandle(block)
      .query(progressQuery)
      .catch(() => null);
  let result: MosaicResult | null = null;
  let failure: string | null = null;
  let failureType: string | null = null;
  if (status === 'COMPLETED') result = (await handle.result()) as MosaicResult;
  if (status === 'FAILED' || status === 'TERMINATED' || status === 'TIMED_OUT' || status === 'CANCELLED') {
    await handle.result().catch((err: unknown) => {
      failure = describeFailure(err);
      failureType = applicationType(err);
    });
  }
  return { workflowId, runId: desc.runId, status, progress, blockProgress, result, failure, failureType };
}

/**
 * Reads a mosaic's status every `intervalMs` (default 1 s) until it is no longer running, and returns the
 * last one (with `result` when it completed). `onStatus` sees each status read, the last one included. With
 * `outages`, reads the server cannot answer are retried (throughOutages) instead of ending the watch.
 */
export async function watchMosaic(
  client: Client,
  workflowId: string,
  opts: {
    intervalMs?: number;
    onStatus?: (status: MosaicStatus) => void | Promise<void>;
    outages?: Omit<OutageOptions, 'what'>;
  } = {},
): Promise<MosaicStatus> {
  const outages = opts.outages;
  for (;;) {
    // With `outages`, a server restart is waited out (the run goes on without us); without, its error is thrown.
    const s = outages
      ? await throughOutages(() => mosaicStatus(client, workflowId), { ...outages, what: workflowId })
      : await mosaicStatus(client, workflowId);
    await opts.onStatus?.(s);
    if (s.status !== 'RUNNING') return s;
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 1_000));
  }
}

/**
 * Cancels a mosaic (or a re-drive): once planned, it stops fetching and writes a partial manifest accounting
 * for every tile; cancelled while planning, it ends with no manifest. Waits until the run has ended (unless
 * `wait: false`) and returns its status then, with `wasRunning`: false when the run had already ended before
 * the cancel (which then changed nothing).
 */
export async function cancelMosaic(
  client: Client,
  workflowId: string,
  opts: { wait?: boolean } = {},
): Promise<MosaicStatus & { wasRunning: boolean }> {
  const handle = client.workflow.getHandle(workflowId);
  let wasRunning: boolean;
  try {
    // The server accepts a cancel of a run that has already ended, and it changes nothing: said, not hidden.
    wasRunning = (await handle.describe()).status.name === 'RUNNING';
    await handle.cancel();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new Error(`no mosaic workflow with id ${JSON.stringify(workflowId)}`, { cause: err });
    throw err;
  }
  if (opts.wait !== false) await handle.result().catch(() => undefined);
  return { ...(await mosaicStatus(client, workflowId)), wasRunning };
}

function applicationType(err: unknown): string | null {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && type) return type;
  }
  return null;
}

function describeFailure(err: unknown): string {
  let e: unknown = err;
  const parts: string[] = [];
  while (e instanceof Error) {
    parts.push(e.message);
    e = (e as { cause?: unknown }).cause;
  }
  return parts.filter((p, i) => p && parts.indexOf(p) === i).join(': ');
}

/** Counts including the running block's live figures. */
export function liveCounts(s: MosaicStatus): MosaicProgress | null {
  if (!s.progress) return null;
  if (!s.blockProgress) return s.progress;
  const counts = { ...s.progress.counts };
  for (const k of Object.keys(counts) as (keyof typeof counts)[]) counts[k] += s.blockProgress.counts[k];
  const states = [...new Set([...s.progress.breakerStates, ...s.blockProgress.breakerStates])];
  return {
    ...s.progress,
    counts,
    done: s.progress.done + s.blockProgress.done,
    breakerStates: states,
    etaSeconds: s.blockProgress.etaSeconds,
    waitingUntil: s.blockProgress.waitingUntil,
    waitingFor: s.blockProgress.waitingFor ?? null,
  };
}

/** What a finished mosaic's exit code says (docs/cli.md). */
export const EXIT = { ok: 0, failed: 1, couldNotRun: 2, gaps: 3, configError: 4 } as const;

/**
 * Exit code for a finished mosaic: 0 every tile ok, 4 a configuration error (the source needs fixing: a wrong
 * layer, credentials), 3 finished with gaps (stale, holes, dead letters, failures).
 */
export function exitCodeFor(result: MosaicResult): number {
  if (result.configError !== undefined) return EXIT.configError;
  return allServed(result) ? EXIT.ok : EXIT.gaps;
}

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
  let recorded: string | undefined;
  try {
    const m = JSON.parse(readFileSync(`${outputKey(abs)}.manifest.json`, 'utf8')) as { workflowId?: string | null };
    if (typeof m.workflowId === 'string' && m.workflowId) recorded = m.workflowId;
  } catch {
    // No manifest readable here (a bucket, another machine's disk, or the mosaic has not assembled yet): the default ids are checked.
  }
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
  let memo: MosaicMemo = {};
  for (const c of candidates) {
    const desc = await client.workflow
      .getHandle(c)
      .describe()
      .catch(() => null);
    if (desc?.status.name === 'RUNNING') throw redriveRefusal(c, desc);
    if (desc && memo.name === undefined) memo = desc.memo ?? {};
  }
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
