import { Client, Connection } from '@temporalio/client';
import type { ConnectionConfig } from './connection-config';

/** A client connection; the error names the address tried when the server cannot be reached. */
/** How long a client waits for the server to answer before saying it cannot be reached. */
const CONNECT_TIMEOUT = '3s';

export async function connectClient(
  config: ConnectionConfig & { address: string },
): Promise<{ client: Client; connection: Connection }> {
  try {
    const connection = await Connection.connect({
      address: config.address,
      // A server that is not there says so in 3 s, not the SDK's 10.
      connectTimeout: CONNECT_TIMEOUT,
      tls: config.tls,
      ...(config.apiKey ? { apiKey: config.apiKey } : {}),
    });
    return { client: new Client({ connection, namespace: config.namespace }), connection };
  } catch (err) {
    throw unreachableServerError(config, err);
  }
}

/** The error for a server that cannot be reached: it names the address, namespace and TLS setting tried. */
export function unreachableServerError(config: ConnectionConfig & { address: string }, err: unknown): Error {
  const why = err instanceof Error ? err.message : String(err);
  return new Error(
    `cannot reach the Temporal server at ${config.address} (namespace ${config.namespace}, TLS ${config.tls ? 'on' : 'off'}): ${why}. ` +
      'Check that the server is running there and that TEMPORAL_ADDRESS names it.',
  );
}
