/**
 * The Temporal side of a benchmark that runs the shared breaker: the server named by the environment
 * (TEMPORAL_ADDRESS), or an embedded dev server in a temporary folder; a client; and tilebreaker's worker on a
 * task queue of the run's own, in this process (with `roots`, confined to them). `close` stops all of it and removes the folder.
 */
import type { Client, Connection } from '@temporalio/client';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connectionConfigFromEnv } from '../../src/client/connection-config';
import { startEmbeddedServer, type EmbeddedServer } from '../../src/client/embedded-server';
import { connectClient } from '../../src/client/temporal';
import { connectWorker, createWorker, type CreateWorkerOptions } from '../../src/client/worker';

export interface BenchTemporal {
  client: Client;
  /** The client's connection, for other clients on it (a counting interceptor's). */
  connection: Connection;
  address: string;
  namespace: string;
  /** `tilebreaker-bench-<name>-<pid>-<ms>`, served by the worker. */
  taskQueue: string;
  /** Stops the worker (its error goes to `onWorkerError`), closes the connections, stops an embedded server. */
  close(onWorkerError?: (message: string) => void): Promise<void>;
}

export async function startBenchTemporal(
  name: string,
  log: (message: string) => void,
  opts: { roots?: CreateWorkerOptions['roots'] } = {},
): Promise<BenchTemporal> {
  const conn = connectionConfigFromEnv();
  let embedded: EmbeddedServer | undefined;
  const dbDir = mkdtempSync(path.join(tmpdir(), `tilebreaker-${name}-`));
  if (!conn.address) {
    log(`${name}: starting an embedded Temporal dev server`);
    embedded = await startEmbeddedServer({ dbFile: path.join(dbDir, 'temporal.sqlite') });
  }
  const address = conn.address ?? embedded!.address;
  const namespace = conn.address ? conn.namespace : embedded!.namespace;
  const { client, connection } = await connectClient({ ...conn, address, namespace });
  const workerConnection = await connectWorker({ ...conn, address, namespace });
  const taskQueue = `tilebreaker-bench-${name}-${process.pid}-${Date.now()}`;
  const worker = await createWorker({
    connection: workerConnection,
    client,
    namespace,
    taskQueue,
    ...(opts.roots ? { roots: opts.roots } : {}),
  });
  const running = worker.run();
  return {
    client,
    connection,
    address,
    namespace,
    taskQueue,
    async close(onWorkerError = () => undefined) {
      worker.shutdown();
      await running.catch((err: unknown) => onWorkerError(err instanceof Error ? err.message : String(err)));
      await connection.close();
      await workerConnection.close();
      await embedded?.stop();
      rmSync(dbDir, { recursive: true, force: true });
    },
  };
}
