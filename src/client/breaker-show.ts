import type { Client } from '@temporalio/client';
import { permitFor, type Permit, type TransitionRecord } from '../breaker';
import { statusQuery, transitionsQuery, type BreakerStatus, type EntityExit } from '../messages/breaker';
import { describeEntity, queryEntity } from './breaker-entity';
import { BreakerNotRunningError } from './breaker-errors';
import { toResolved, type ResolvedKey } from './breaker-keys';

export type ShownBreaker =
  | {
      running: true;
      key: string;
      workflowId: string;
      runId: string;
      taskQueue: string;
      startTime: Date;
      status: BreakerStatus;
      /** What a worker would be told now (by this machine's clock), from the entity's view. */
      permitNow: Permit;
      /** Most recent first. */
      transitions: TransitionRecord[];
    }
  | {
      running: false;
      key: string;
      workflowId: string;
      runId: string;
      taskQueue: string;
      startTime: Date;
      /** The latest run's status: COMPLETED (finished idle, closed), TERMINATED, FAILED, ... */
      executionStatus: string;
      closeTime: Date | null;
      /** A run that finished idle returns its transition log (most recent first); others: empty. */
      transitions: TransitionRecord[];
    };

/**
 * One breaker in full: the `status` and `transitions` queries of its entity (`limit`: at most this many
 * transitions, most recent first). An entity that finished (idle) is shown from its result.
 */
export async function showBreaker(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  opts: { limit?: number } = {},
): Promise<ShownBreaker> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  const handle = client.workflow.getHandle(resolved.workflowId);
  const common = {
    key: resolved.key,
    workflowId: resolved.workflowId,
    runId: d.runId,
    taskQueue: d.taskQueue,
    startTime: d.startTime,
  };
  if (d.status.name !== 'RUNNING') {
    let transitions: TransitionRecord[] = [];
    if (d.status.name === 'COMPLETED') {
      const exit = (await handle.result()) as EntityExit;
      transitions = (exit.transitions ?? []).slice(0, opts.limit);
    }
    return { running: false, ...common, executionStatus: d.status.name, closeTime: d.closeTime ?? null, transitions };
  }
  // One query at a time: a second query sent while the first waits on a workflow task sits out a server-side
  // retry (about 1.7 s on a dev server).
  const [status, transitions] = await queryEntity(
    client,
    resolved,
    d,
    async () =>
      [
        await handle.query(statusQuery),
        opts.limit === undefined
          ? await handle.query(transitionsQuery)
          : await handle.query(transitionsQuery, opts.limit),
      ] as const,
  );
  return { running: true, ...common, status, permitNow: permitFor(status.view, Date.now()), transitions };
}

/** A running breaker's full status (its entity's `status` query): view, permit, figures, configuration, probes, counters. */
export async function breakerStatus(client: Client, keyOrUrl: string | ResolvedKey): Promise<BreakerStatus> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  if (d.status.name !== 'RUNNING')
    throw new BreakerNotRunningError(resolved.key, resolved.workflowId, d.status.name, d.closeTime);
  const handle = client.workflow.getHandle(resolved.workflowId);
  return queryEntity(client, resolved, d, () => handle.query(statusQuery));
}

/**
 * A breaker's transition log, most recent first (at most `limit`): its entity's `transitions` query, or for an
 * entity that finished idle the log its run returned (none for a run that was terminated or failed).
 */
export async function breakerTransitions(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  opts: { limit?: number } = {},
): Promise<TransitionRecord[]> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  const handle = client.workflow.getHandle(resolved.workflowId);
  if (d.status.name !== 'RUNNING') {
    if (d.status.name !== 'COMPLETED') return [];
    const exit = (await handle.result()) as EntityExit;
    return (exit.transitions ?? []).slice(0, opts.limit);
  }
  return queryEntity(client, resolved, d, () =>
    opts.limit === undefined ? handle.query(transitionsQuery) : handle.query(transitionsQuery, opts.limit),
  );
}
