import { readFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import {
  bundleWorkflowCode,
  NativeConnection,
  Runtime,
  Worker,
  type WorkerDeploymentOptions,
  type WorkerPlugin,
} from '@temporalio/worker';
import { createActivityRuntime, type ActivityDeps, type Activities } from '../activities';
import { atomicWrite } from '../activities/tile-store/atomic-write';
import { processIdentity } from '../activities/guard';
import { fetchTaskQueue } from '../messages/activities';
import type { ConnectionConfig } from './connection-config';
import { DEFAULT_FETCH_BATCHES } from './fetch-batches';
import { unreachableServerError } from './temporal';
import { buildHash, deploymentOptions, promoteWhenPolling, type WorkerVersioning } from './versioning';

export { DEFAULT_FETCH_BATCHES, FETCH_BATCHES_ENV, parseFetchBatches } from './fetch-batches';

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
  /** The most fetch batches this worker runs at once (default DEFAULT_FETCH_BATCHES; the CLI checks its flag with parseFetchBatches). */
  fetchBatches?: number;
  /**
   * Run as a build of a Worker Deployment (versioning.ts, docs/upgrading.md); both of its SDK Workers report
   * it. Without it the worker is unversioned, as before (`tilebreaker worker` is versioned by default).
   */
  versioning?: WorkerVersioning;
}

/** How often a worker sends an activity's heartbeats at most (fetch batches time out after 6 s without one). */
const HEARTBEAT_THROTTLE = '1.5s';

/** A library caller's fetch-batch cap (default DEFAULT_FETCH_BATCHES), checked before anything is opened. */
function checkedFetchBatches(n: number | undefined): number {
  const fetchBatches = n ?? DEFAULT_FETCH_BATCHES;
  if (!Number.isSafeInteger(fetchBatches) || fetchBatches < 1)
    throw new Error(`fetchBatches must be a whole number of at least 1 (got ${String(fetchBatches)})`);
  return fetchBatches;
}

/**
 * The tilebreaker worker: every workflow type and activity on one task queue, and beside it, in the same
 * process and run with it, a worker for the fetch task queue (`<task queue>-fetch`) that runs at most
 * `fetchBatches` fetch batches at once. The SDK reserves a slot before it polls, so a worker at its cap takes
 * no further batch; the other activities (plan, assemble, awaitBreaker, the breaker's probes) are on the main
 * queue and never wait for that cap. When the worker stops, the fetch worker and the activities' shared
 * resources stop with it: the breaker guard flushes its last reports, the HTTP pools close.
 */
export async function createWorker(opts: CreateWorkerOptions): Promise<Worker> {
  const fetchBatches = checkedFetchBatches(opts.fetchBatches);
  // One id for the worker in Temporal (activity attempts name it) and among the breakers' reporters.
  const identity = processIdentity('worker');
  const runtime = createActivityRuntime({
    client: opts.client,
    taskQueue: opts.taskQueue,
    identity,
    ...(opts.breaker ? { breaker: opts.breaker } : {}),
    ...(opts.roots ? { roots: opts.roots } : {}),
  });
  const common = {
    identity,
    // Heartbeats reach the server every 1.5 s, well within a fetch batch's 6 s heartbeat timeout (the SDK's
    // own choice, 0.8 x the timeout, would leave 1.2 s), and a cancel reaches a running batch within 1.5 s.
    maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
    connection: opts.connection,
    namespace: opts.namespace,
    // The fetch queue belongs to the same build: a versioned mosaic's batches go to its build's fetch workers.
    ...(opts.versioning ? { workerDeploymentOptions: deploymentOptions(opts.versioning) } : {}),
  } as const;
  const plugins: WorkerPlugin[] = [];
  if (opts.versioning?.promote === 'auto')
    plugins.push(promoteOnRun(opts.client, opts.versioning, opts.taskQueue, identity));
  let fetcher: Worker;
  try {
    fetcher = await createFetchWorker({
      ...common,
      taskQueue: opts.taskQueue,
      activities: runtime.activities,
      fetchBatches,
    });
  } catch (err) {
    await runtime.close();
    throw err;
  }
  try {
    // The main queue keeps fetchMosaicBatch: plans made while no worker polled the fetch queue send batches here.
    return await Worker.create({
      ...common,
      taskQueue: opts.taskQueue,
      ...(await workflowCode()),
      activities: runtime.activities,
      plugins: [runAlongside('tilebreaker-fetch-worker', fetcher, () => runtime.close()), ...plugins],
    });
  } catch (err) {
    // The fetch worker never ran: let its native worker go with the runtime.
    await fetcher.runUntil(Promise.resolve()).catch(() => undefined);
    await runtime.close();
    throw err;
  }
}

/**
 * `TILEBREAKER_WORKFLOW_CACHE`: a folder where workers keep the bundle of this build's workflow code, one file per
 * build (the compiled code's hash and the SDK's version name it), so the next worker of the same build starts
 * without bundling (webpack, seconds a worker). Unset: every worker bundles, as the SDK does.
 */
export const WORKFLOW_CACHE_ENV = 'TILEBREAKER_WORKFLOW_CACHE';

/** The version of the workflow SDK the bundle is made with. */
function sdkVersion(): string {
  return (JSON.parse(readFileSync(require.resolve('@temporalio/workflow/package.json'), 'utf8')) as { version: string })
    .version;
}

/** The worker's workflow code: the bundle kept for this build, or the module to bundle. */
export async function workflowCode(
  env: NodeJS.ProcessEnv = process.env,
  build: () => string = () => `${sdkVersion()}-${buildHash()}`,
): Promise<{ workflowsPath: string } | { workflowBundle: { code: string } }> {
  const dir = env[WORKFLOW_CACHE_ENV];
  if (!dir) return { workflowsPath };
  const file = path.join(path.resolve(dir), `workflows-${build()}.js`);
  try {
    return { workflowBundle: { code: await readFile(file, 'utf8') } };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const { code } = await bundleWorkflowCode({ workflowsPath, logger: Runtime.instance().logger });
  // Renamed into place: a worker reading it meanwhile finds none or all of it.
  await mkdir(path.dirname(file), { recursive: true });
  await atomicWrite(file, Buffer.from(code));
  return { workflowBundle: { code } };
}

export interface CreateFetchWorkerOptions {
  /** A worker connection (connectWorker). */
  connection: NativeConnection;
  namespace: string;
  /** The mosaics' task queue (your main worker's): the fetch worker polls `<taskQueue>-fetch`. */
  taskQueue: string;
  /** The activities of your main worker's runtime (createActivityRuntime): batches share its HTTP pools and breaker guard. */
  activities: Pick<Activities, 'fetchMosaicBatch'>;
  /** The most fetch batches it runs at once (default DEFAULT_FETCH_BATCHES). */
  fetchBatches?: number;
  /** Its identity in Temporal (default: the SDK's). */
  identity?: string;
  /** Passed to the SDK (default 1.5 s: a batch's heartbeat timeout is 6 s). */
  maxHeartbeatThrottleInterval?: string;
  /** Your main worker's, if it is versioned: the fetch queue must be served by the same build. */
  workerDeploymentOptions?: WorkerDeploymentOptions;
}

/**
 * Opt-in for a worker of your own: a Worker for the fetch task queue (`<task queue>-fetch`) that runs at most
 * `fetchBatches` of the mosaics' fetch batches at once. Run it beside your main worker, in the same process.
 * While any worker polls that queue, new mosaics send their batches there (ARCHITECTURE.md, docs/deploying.md); without
 * one, batches stay on the main queue, which your main worker serves.
 */
export async function createFetchWorker(opts: CreateFetchWorkerOptions): Promise<Worker> {
  const fetchBatches = checkedFetchBatches(opts.fetchBatches);
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: fetchTaskQueue(opts.taskQueue),
    activities: { fetchMosaicBatch: opts.activities.fetchMosaicBatch },
    maxConcurrentActivityTaskExecutions: fetchBatches,
    ...(opts.identity !== undefined ? { identity: opts.identity } : {}),
    maxHeartbeatThrottleInterval: opts.maxHeartbeatThrottleInterval ?? HEARTBEAT_THROTTLE,
    ...(opts.workerDeploymentOptions !== undefined ? { workerDeploymentOptions: opts.workerDeploymentOptions } : {}),
  });
}

/**
 * While the worker runs: make its build current once it polls the main queue (workflows and activities) and
 * the fetch queue, under promoteWhenPolling's rules; the outcome is logged. Stops looking when the worker stops.
 */
function promoteOnRun(client: Client, v: WorkerVersioning, taskQueue: string, identity: string): WorkerPlugin {
  return {
    name: 'tilebreaker-promote',
    runWorker: async (worker, next) => {
      const stop = new AbortController();
      const log = Runtime.instance().logger;
      const meta = { deploymentName: v.deploymentName, buildId: v.buildId };
      const promoting = promoteWhenPolling(
        client,
        v,
        { workflow: [taskQueue], activity: [taskQueue, fetchTaskQueue(taskQueue)] },
        { signal: stop.signal, identity },
      ).then(
        (o) => {
          if (o.promoted) {
            const moves = o.pinned !== undefined ? { pinned: o.pinned, moved: o.moved } : {};
            log.info(`this build is now the current version of its deployment (was ${o.previous})`, {
              ...meta,
              ...moves,
            });
            if (o.moveError)
              log.warn('breaker entities of the 0.x build were not moved; see docs/upgrading.md', {
                ...meta,
                error: o.moveError,
              });
          } else if (o.why === 'timed out')
            log.warn('could not make this build current; set it with temporal worker deployment set-current-version', {
              ...meta,
              lastError: o.lastError,
            });
          else if (o.why !== 'stopped') log.info(`this build was not made current: ${o.why}`, meta);
        },
        (err: unknown) => {
          log.warn('could not make this build current', { ...meta, error: String(err) });
        },
      );
      try {
        await next(worker);
      } finally {
        stop.abort();
        await promoting;
      }
    },
  };
}

/**
 * Runs `beside` for as long as the worker runs (run() resolves once it has drained; runUntil() goes through
 * run() too): either one's stop or failure stops the other, and `close` runs once both have stopped. The
 * SDK's plugin hook wraps run() for us, so the Worker stays the SDK's own object.
 */
export function runAlongside(name: string, beside: Worker, close: () => Promise<void>): WorkerPlugin {
  const stop = (w: Worker) => {
    if (w.getState() === 'RUNNING') w.shutdown();
  };
  return {
    name,
    runWorker: async (worker, next) => {
      // Settled at once: a failure of `beside` is held until the worker has drained, never left unhandled
      // (Node would end the process on it, skipping the drain and `close`).
      const besideDone = settled(beside.run()).finally(() => stop(worker));
      const ran = await settled(next(worker));
      stop(beside);
      const besideRan = await besideDone;
      await close();
      // The worker's own failure first: the fetch worker's is most likely its consequence.
      if (!ran.ok) throw ran.err;
      if (!besideRan.ok) throw besideRan.err;
    },
  };
}

/** `p`'s outcome as a value: it never rejects. */
function settled(p: Promise<unknown>): Promise<{ ok: true } | { ok: false; err: unknown }> {
  return p.then(
    () => ({ ok: true as const }),
    (err: unknown) => ({ ok: false as const, err }),
  );
}
