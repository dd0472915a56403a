import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { ConnectionConfig } from './connection-config';

/** A client connection; the error names the address tried when the server cannot be reached. */
export async function connectClient(config: ConnectionConfig & { address: string }): Promise<{ client: Client; connection: Connection }> {
  try {
    const connection = await Connection.connect({
      address: config.address,
      tls: config.tls,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    });
    return { client: new Client({ connection, namespace: config.namespace }), connection };
  } catch (err) {
    throw unreachable(config, err);
  }
}

/** A worker connection, with the same error. */
export async function connectWorker(config: ConnectionConfig & { address: string }): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect({
      address: config.address,
      tls: config.tls,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    });
  } catch (err) {
    throw unreachable(config, err);
  }
}

function unreachable(config: ConnectionConfig & { address: string }, err: unknown): Error {
  const why = err instanceof Error ? err.message : String(err);
  return new Error(
    `cannot reach the Temporal server at ${config.address} (namespace ${config.namespace}, TLS ${config.tls ? 'on' : 'off'}): ${why}. ` +
      'Check that the server is running there and that TEMPORAL_ADDRESS names it.',
  );
}
