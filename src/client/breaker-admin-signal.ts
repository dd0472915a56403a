import { WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import type { AdminSender, TransitionRecord } from '../breaker';
import {
  adminSignal,
  statusQuery,
  transitionsQuery,
  type AdminAction,
  type BreakerStatus,
  type EntityInput,
} from '../messages/breaker';
import { checkAdminAction } from '../messages/breaker-validation';
import { describeEntity } from './breaker-entity';
import { AdminNotConfirmedError, BreakerNotRunningError } from './breaker-errors';
import { BREAKER_WORKFLOW_TYPE, type ResolvedKey } from './breaker-keys';

/** How long an admin action waits, after its signal, for the entity to show its effect (adminBreaker's `confirmTimeoutMs`). */
export const DEFAULT_CONFIRM_TIMEOUT_MS = 10_000;

/** How far the server's clock may lag this process's when telling this action's transitions from older ones. */
const CLOCK_SKEW_MS = 30_000;
/** The least time a read-back query is given, even when the confirmation's deadline is closer. */
const MIN_QUERY_MS = 500;

/** An admin signal as sent: the action, with the actor as given and this process as its sender. */
export type SignedAdminAction = AdminAction & { actor: string; sender: AdminSender };

/** Whether a status read back shows the action, and the transition it recorded. */
export interface AdminCheck {
  transition: TransitionRecord | null;
  confirmed: boolean;
}

/** What sendAdmin sends, where, and how it tells that the action shows. */
export interface AdminSend {
  client: Client;
  resolved: ResolvedKey;
  signal: SignedAdminAction;
  /** How long to read the status back after the signal (default DEFAULT_CONFIRM_TIMEOUT_MS). */
  confirmTimeoutMs: number | undefined;
  /** Send by signal-with-start, on this task queue with this input: an entity is started where none runs. */
  start: { taskQueue: string; input: EntityInput } | undefined;
  /** Sees the status, and the transitions this signal's actor and sender recorded since it was sent (newest first). */
  check: (status: BreakerStatus, ours: TransitionRecord[]) => AdminCheck;
}

/** The signal's send time and the status read back after it. */
export interface AdminReadBack extends AdminCheck {
  sentAt: number;
  status: BreakerStatus;
}

/**
 * Sends an admin signal, then reads the entity's status and newest transitions back until `check` says the
 * action shows or `confirmTimeoutMs` (default 10 s) has passed since the signal. The signal is the first call to
 * the server, with nothing read before it: an emergency force-open must not wait on anything but the server
 * (queries need the entity's workflow task, which waits its turn on a loaded worker; a signal only needs the
 * server). With `start`, it goes by signal-with-start, which also starts an entity for a key that has none.
 * `check` sees the transitions this signal's actor and sender recorded since it was sent, most recent first.
 */
export async function sendAdmin(send: AdminSend): Promise<AdminReadBack> {
  // Checked as the entity checks it (it would refuse the signal whole): the error names the field and value.
  checkAdminAction(send.signal);
  const handle = send.client.workflow.getHandle(send.resolved.workflowId);
  const sentAt = Date.now();
  await deliver(send, handle);
  // The signal is in: from here on nothing throws but "not yet confirmed".
  return readBack(send, handle, sentAt);
}

/** The signal itself (or signal-with-start); a key with nothing running to signal says why. */
async function deliver(send: AdminSend, handle: WorkflowHandle): Promise<void> {
  const { client, resolved, signal, start } = send;
  try {
    if (start) {
      // A breaker can be opened ahead of a maintenance window, before any worker has reported on it; an entity
      // that finished idle starts again.
      await client.workflow.signalWithStart(BREAKER_WORKFLOW_TYPE, {
        workflowId: resolved.workflowId,
        taskQueue: start.taskQueue,
        args: [start.input],
        signal: adminSignal,
        signalArgs: [signal],
      });
    } else {
      await handle.signal(adminSignal, signal);
    }
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    // Nothing running to signal: say whether there is no entity at all or one that ended, and how.
    const d = await describeEntity(client, resolved);
    throw new BreakerNotRunningError(resolved.key, resolved.workflowId, d.status.name, d.closeTime);
  }
}

/** Reads the status back every 100 ms until `check` confirms the action or the deadline has passed. */
async function readBack(send: AdminSend, handle: WorkflowHandle, sentAt: number): Promise<AdminReadBack> {
  const { client, resolved } = send;
  const { action, actor, sender } = send.signal;
  const deadline = sentAt + (send.confirmTimeoutMs ?? DEFAULT_CONFIRM_TIMEOUT_MS);
  for (;;) {
    try {
      const [status, recent] = await client.withDeadline(
        Math.max(deadline, Date.now() + MIN_QUERY_MS),
        async () => [await handle.query(statusQuery), await handle.query(transitionsQuery, 20)] as const,
      );
      const ours = recent.filter((t) => isOurs(t, sentAt, actor, sender));
      const { transition, confirmed } = send.check(status, ours);
      if (confirmed || Date.now() >= deadline) return { sentAt, status, transition, confirmed };
    } catch (err) {
      if (Date.now() >= deadline) {
        const why = err instanceof Error ? err.message : String(err);
        const waited = ((Date.now() - sentAt) / 1000).toFixed(1);
        throw new AdminNotConfirmedError(
          resolved.key,
          resolved.workflowId,
          action,
          sentAt,
          `the entity answered no status query within ${waited} s of the signal (${why})`,
        );
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * This action's transitions: by its actor and sender, recorded since it was sent (a worker from before
 * senders were recorded: by the actor in the detail).
 */
function isOurs(t: TransitionRecord, sentAt: number, actor: string, sender: AdminSender): boolean {
  return (
    t.at >= sentAt - CLOCK_SKEW_MS &&
    (t.sender
      ? t.actor === actor && t.sender.identity === sender.identity && t.sender.host === sender.host
      : t.detail.includes(actor))
  );
}
