import { setTimeout as delay } from 'node:timers/promises';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { AwaitWorkflowClosedInput, AwaitWorkflowClosedResult } from '../../messages/activities';
import { activityContext } from '../activity-context';

/** How often the other run's status is read while waiting: a describe a second is cheap for the server. */
const POLL_MS = 1_000;

/**
 * A schedule's run with a buffer overlap policy waits here for the run that holds its output to end: one
 * activity per stretch of waiting (at most `forMs`, capped at an hour), heartbeating, so the history stays
 * small however long the other run takes, and a worker that dies mid-wait is replaced by a retry.
 */
export function makeAwaitWorkflowClosed(client: Client) {
  return async function awaitWorkflowClosed(input: AwaitWorkflowClosedInput): Promise<AwaitWorkflowClosedResult> {
    const ctx = activityContext();
    const forMs = Math.max(0, Math.min(Number(input.forMs) || 0, 3_600_000));
    const end = Date.now() + forMs;
    const handle = client.workflow.getHandle(String(input.workflowId));
    for (;;) {
      const status = await handle.describe().then(
        (d) => d.status.name,
        (err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return null;
          throw err;
        },
      );
      if (status !== 'RUNNING') return { closed: true, status };
      const left = end - Date.now();
      if (left <= 0 || ctx?.cancellationSignal.aborted) return { closed: false, status };
      ctx?.heartbeat();
      await delay(Math.min(POLL_MS, left), undefined, ctx ? { signal: ctx.cancellationSignal } : {}).catch(
        () => undefined,
      );
    }
  };
}
