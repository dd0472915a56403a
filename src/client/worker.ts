import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities';

/** The tilebreaker worker: every workflow type and activity on one task queue. */
export async function createWorker(opts: { connection: NativeConnection; client: Client; namespace: string; taskQueue: string }): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowsPath: require.resolve('../workflows'),
    activities: createActivities({ client: opts.client, taskQueue: opts.taskQueue }),
  });
}
