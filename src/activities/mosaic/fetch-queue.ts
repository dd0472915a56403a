import type { Client } from '@temporalio/client';
import { fetchTaskQueue } from '../../messages/activities';
import type { FetchQueueChoice, MosaicPlan } from '../../messages/mosaic-types';

/**
 * How long a batch on the fetch queue may wait for a fetch worker before it runs on the workflow's own queue
 * (its schedule-to-start timeout). Long enough that a fleet whose fetch slots are busy rarely falls back (a
 * batch of 256 tiles takes seconds to a minute), short enough that a plan made while the server still listed
 * workers that have gone (it keeps a poller listed for minutes after its last poll) costs minutes, not a hang.
 */
export const DEFAULT_FETCH_QUEUE_START_WITHIN_MS = 2 * 60_000;

// temporal.api.enums.v1 values (@temporalio/proto is not a direct dependency).
const TASK_QUEUE_KIND_NORMAL = 1;
const TASK_QUEUE_TYPE_ACTIVITY = 2;

/**
 * The fetch queue of `taskQueue` if the server lists a worker polling it for activities, else null (no worker
 * serves it, or the server could not say: batches then go to the main queue, which every worker serves).
 */
export async function servedFetchQueue(
  client: Client,
  taskQueue: string,
  startWithinMs: number,
): Promise<FetchQueueChoice | null> {
  const name = fetchTaskQueue(taskQueue);
  try {
    const r = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name, kind: TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TASK_QUEUE_TYPE_ACTIVITY,
    });
    return (r.pollers?.length ?? 0) > 0 ? { taskQueue: name, startWithinMs } : null;
  } catch {
    return null;
  }
}

/** `plan` with its fetch queue decided now (a re-drive's plan, read from disk, drops the first run's choice). */
export async function withFetchQueue(
  plan: MosaicPlan,
  client: Client,
  taskQueue: string,
  startWithinMs: number,
): Promise<MosaicPlan> {
  const { fetchQueue: _old, ...rest } = plan;
  const q = await servedFetchQueue(client, taskQueue, startWithinMs);
  return q ? { ...rest, fetchQueue: q } : rest;
}
