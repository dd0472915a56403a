import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivityRuntime, type ActivityDeps } from '../activities';

/**
 * The tilebreaker worker: every workflow type and activity on one task queue. When the worker stops, the
 * activities' shared resources stop with it: the breaker guard flushes its last reports, the HTTP pools close.
 */
export async function createWorker(opts: {
  connection: NativeConnection;
  client: Client;
  namespace: string;
  taskQueue: string;
  breaker?: ActivityDeps['breaker'];
  /** Where requesters' files may be read and written (default: from the environment, else the working directory). */
  roots?: ActivityDeps['roots'];
}): Promise<Worker> {
  const runtime = createActivityRuntime({ client: opts.client, taskQueue: opts.taskQueue, ...(opts.breaker ? { breaker: opts.breaker } : {}), ...(opts.roots ? { roots: opts.roots } : {}) });
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowsPath: require.resolve('../workflows'),
    activities: runtime.activities,
  });
  // run() (which runUntil() calls too) resolves once the worker has drained: then release what activities held.
  const run = worker.run.bind(worker);
  worker.run = () => run().finally(() => runtime.close());
  return worker;
}
