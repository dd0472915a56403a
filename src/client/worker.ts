import type { Client } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerPlugin } from '@temporalio/worker';
import { createActivityRuntime, type ActivityDeps } from '../activities';
import { processIdentity } from '../activities/guard';
import type { ConnectionConfig } from './connection-config';
import { unreachableServerError } from './temporal';

/** A worker connection (to pass to createWorker); the error names the address tried, as connectClient's does. */
export async function connectWorker(config: ConnectionConfig & { address: string }): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect({
      address: config.address,
      tls: config.tls,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    });
  } catch (err) {
    throw unreachableServerError(config, err);
  }
}

/**
 * tilebreaker's workflow code, the module `tilebreaker/workflows` resolves to: the `workflowsPath` of its
 * worker and of its replays.
 */
export const workflowsPath = require.resolve('../workflows');

export interface CreateWorkerOptions {
  /** A worker connection (connectWorker). */
  connection: NativeConnection;
  /** A client of the same namespace, for the activities (the breaker guard, the search-attribute check). */
  client: Client;
  namespace: string;
  taskQueue: string;
  /** Policy and self-probe for the breaker entities this worker's guard creates (an existing entity keeps its own). */
  breaker?: ActivityDeps['breaker'];
  /** Where requesters' files may be read and written (default: from the environment, else the working directory). */
  roots?: ActivityDeps['roots'];
}

/**
 * The tilebreaker worker: every workflow type and activity on one task queue. When the worker stops, the
 * activities' shared resources stop with it: the breaker guard flushes its last reports, the HTTP pools close.
 */
export async function createWorker(opts: CreateWorkerOptions): Promise<Worker> {
  // One id for the worker in Temporal (activity attempts name it) and among the breakers' reporters.
  const identity = processIdentity('worker');
  const runtime = createActivityRuntime({ client: opts.client, taskQueue: opts.taskQueue, identity, ...(opts.breaker ? { breaker: opts.breaker } : {}), ...(opts.roots ? { roots: opts.roots } : {}) });
  return Worker.create({
    identity,
    // Heartbeats reach the server every 1.5 s, not every 0.8 x the heartbeat timeout (16 s for a fetch batch).
    // A batch records its results every 0.5 s (fetch-batch.ts), so a lost worker's batch resumes from results
    // at most 2 s old, and a cancel reaches a running batch within 1.5 s.
    maxHeartbeatThrottleInterval: '1.5s',
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowsPath,
    activities: runtime.activities,
    plugins: [closeAfterRun('tilebreaker-activity-runtime', () => runtime.close())],
  });
}

/**
 * Runs `close` once the worker has stopped (run() resolves once it has drained; runUntil() goes through
 * run() too), whether it stopped cleanly or failed. The SDK's plugin hook wraps run() for us, so the
 * Worker stays the SDK's own object.
 */
function closeAfterRun(name: string, close: () => Promise<void>): WorkerPlugin {
  return {
    name,
    runWorker: (worker, next) => next(worker).finally(close),
  };
}
