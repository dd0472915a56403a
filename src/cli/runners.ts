// What commands run with: the SDK's runtime (with its metrics endpoint), a client for TEMPORAL_ADDRESS, or a
// client and a worker (on an embedded dev server when TEMPORAL_ADDRESS is unset). Loaded by src/cli/main.ts at
// start: the worker, the embedded server and the connections are imported only when a command runs.
import type { Client } from '@temporalio/client';
import {
  bindAddressOf,
  freePort,
  METRICS_ADDR_ENV,
  metricsUrl,
  parseMetricsAddr,
  portFree,
  prometheusTelemetry,
} from '../client/telemetry';
import type { CreateWorkerOptions } from '../client/worker';
import type { LineLogger } from './logging';

/** Where a command serves Prometheus metrics: `--metrics-addr`, else (with `fromEnv`) TILEBREAKER_METRICS_ADDR. */
export interface MetricsChoice {
  flag: string | undefined;
  fromEnv: boolean;
  /** When the port is taken, serve on a free port of the same IP instead (the demo's). */
  anyPortIfTaken?: boolean;
}

/** A client and the fleet's task queue (TILEBREAKER_TASK_QUEUE). */
export interface ClientContext {
  client: Client;
  taskQueue: string;
}

/** A client, and a worker polling `taskQueue` in this process, on the server at `address`. */
export interface TemporalContext extends ClientContext {
  address: string;
  metricsAt: string | null;
}

/** Runs `fn` with a client (and, for `withLocal`, a worker in this process when TEMPORAL_ADDRESS is unset). */
export type WithClient = (fn: (ctx: ClientContext) => Promise<void>) => Promise<void>;

/** `withLocal`: as `withClient` with TEMPORAL_ADDRESS set, else on an embedded server with a worker in this process. */
export interface ClientRunners {
  withClient: WithClient;
  withLocal: WithClient;
}

export interface WithTemporalOptions {
  breaker?: CreateWorkerOptions['breaker'];
  /** The demo's endpoint. */
  metrics?: MetricsChoice;
}

/** The runners bound to this process's logger (src/cli/main.ts makes them once). */
export interface Runners {
  logger: LineLogger;
  installRuntime: (metrics: MetricsChoice) => Promise<string | null>;
  withTemporal: (fn: (ctx: TemporalContext) => Promise<void>, opts?: WithTemporalOptions) => Promise<void>;
  withClient: (fn: (ctx: ClientContext) => Promise<void>, what?: string) => Promise<void>;
}

/** The runners for this process, the SDK's runtime logging through `logger`. */
export function runners(logger: LineLogger): Runners {
  return {
    logger,
    installRuntime: (metrics) => installRuntime(logger, metrics),
    withTemporal: (fn, opts) => withTemporal(logger, fn, opts),
    withClient,
  };
}

/**
 * Installs the SDK's runtime (once per process: each command calls this at most once), before the first worker connection: with a Prometheus endpoint when
 * the command serves metrics (`--metrics-addr`, else TILEBREAKER_METRICS_ADDR; off unless set). Only commands
 * that run a worker install it (worker, demo, drill, a local `mosaic start --wait`): a client needs none, so
 * the others never load @temporalio/worker. Returns the metrics URL, or null.
 *
 * `anyPortIfTaken` (the demo's): when the port is taken, serve on a free port of the same IP instead, and say
 * so on stderr, rather than stop (`npm start` names 127.0.0.1:9464; a second demo, or anything else there,
 * would stop it). A worker's endpoint is what its scraper is configured for: a taken port stops it, naming it.
 */
export async function installRuntime(logger: LineLogger, metrics: MetricsChoice): Promise<string | null> {
  const env = metrics.fromEnv ? process.env[METRICS_ADDR_ENV] || undefined : undefined;
  const what = metrics.flag !== undefined ? '--metrics-addr' : METRICS_ADDR_ENV;
  const value = metrics.flag ?? env;
  let addr = value !== undefined ? parseMetricsAddr(value, what) : null;
  if (addr && metrics.anyPortIfTaken && !(await portFree(addr.host, addr.port))) {
    const bindAddress = bindAddressOf(addr.host, await freePort(addr.host));
    console.error(
      `tilebreaker: ${what} ${addr.bindAddress} is taken (something else listens there); serving metrics at ${metricsUrl(bindAddress)} instead`,
    );
    addr = { ...addr, bindAddress };
  }
  const { Runtime } = await import('@temporalio/worker');
  try {
    Runtime.install({ logger, ...(addr ? { telemetryOptions: prometheusTelemetry(addr.bindAddress) } : {}) });
  } catch (err) {
    // The one failure here in practice: the port is taken ("Address already in use").
    throw new Error(`${what} ${value ?? ''}: ${(err as Error).message}`, { cause: err });
  }
  return addr ? metricsUrl(addr.bindAddress) : null;
}

/**
 * Runs `fn` with a client and a worker polling the task queue: against TEMPORAL_ADDRESS when set,
 * otherwise against an embedded dev server that is stopped afterwards. `metrics`: the demo's endpoint.
 */
export async function withTemporal(
  logger: LineLogger,
  fn: (ctx: TemporalContext) => Promise<void>,
  opts: WithTemporalOptions = {},
): Promise<void> {
  const metricsAt = await installRuntime(logger, opts.metrics ?? { flag: undefined, fromEnv: false });
  const [{ connectionConfigFromEnv }, { startEmbeddedServer }, { connectClient }, { connectWorker, createWorker }] =
    await Promise.all([
      import('../client/connection-config.js'),
      import('../client/embedded-server.js'),
      import('../client/temporal.js'),
      import('../client/worker.js'),
    ]);
  const config = connectionConfigFromEnv();
  let server: Awaited<ReturnType<typeof startEmbeddedServer>> | undefined;
  if (!config.address) {
    console.error(
      'tilebreaker: TEMPORAL_ADDRESS is unset; starting a local Temporal dev server (state in .temporal/dev-server.sqlite)',
    );
    server = await startEmbeddedServer();
  }
  const address = config.address ?? server!.address;
  const namespace = server ? server.namespace : config.namespace;
  try {
    const { client, connection } = await connectClient({ ...config, address, namespace });
    const workerConnection = await connectWorker({ ...config, address, namespace });
    const worker = await createWorker({
      connection: workerConnection,
      client,
      namespace,
      taskQueue: config.taskQueue,
      ...(opts.breaker ? { breaker: opts.breaker } : {}),
    });
    try {
      await worker.runUntil(fn({ client, taskQueue: config.taskQueue, address, metricsAt }));
    } finally {
      await connection.close();
      await workerConnection.close();
    }
  } finally {
    await server?.stop();
  }
}

/** A client for TEMPORAL_ADDRESS: these commands act on the fleet's server, never on an embedded one. */
export async function withClient(
  fn: (ctx: ClientContext) => Promise<void>,
  what = 'this command needs',
): Promise<void> {
  const [{ connectionConfigFromEnv }, { connectClient }] = await Promise.all([
    import('../client/connection-config.js'),
    import('../client/temporal.js'),
  ]);
  const config = connectionConfigFromEnv();
  if (!config.address) {
    throw new Error(
      `${what} TEMPORAL_ADDRESS: name the Temporal frontend the fleet uses, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233`,
    );
  }
  // connectClient's error names the address tried when the server cannot be reached.
  const { client, connection } = await connectClient({ ...config, address: config.address });
  try {
    await fn({ client, taskQueue: config.taskQueue });
  } finally {
    await connection.close();
  }
}
