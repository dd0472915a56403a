import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { progressQuery } from '../messages/mosaic';
import { allServed, type MosaicProgress, type MosaicResult } from '../messages/mosaic-types';
import { throughOutages, type OutageOptions } from './server-wait';

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
