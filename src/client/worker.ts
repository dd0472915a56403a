import { NativeConnection, Worker } from '@temporalio/worker';
import * as activities from '../activities';

/** The tilebreaker worker: every workflow type on one task queue. Activities join as they are built. */
export async function createWorker(opts: { connection: NativeConnection; namespace: string; taskQueue: string }): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowsPath: require.resolve('../workflows'),
    activities,
  });
}
