import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseOrThrow } from '../breaker/config-error';

/**
 * Where tilebreaker finds Temporal, from the environment (the same variables the Temporal CLI reads):
 *   TEMPORAL_ADDRESS          host:port of the frontend; unset: tilebreaker starts a local dev server
 *   TEMPORAL_NAMESPACE        default "default"
 *   TEMPORAL_API_KEY          Temporal Cloud API key (implies TLS)
 *   TEMPORAL_TLS              "true" to use TLS with the system's CAs
 *   TEMPORAL_TLS_CERT / TEMPORAL_TLS_KEY   mTLS client certificate and key (paths; implies TLS)
 *   TEMPORAL_TLS_CA           server CA bundle (path)
 *   TEMPORAL_TLS_SERVER_NAME  override the TLS server name
 *   TILEBREAKER_TASK_QUEUE    default "tilebreaker"
 */
const envSchema = z.object({
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  TEMPORAL_TLS: z.enum(['true', 'false', '1', '0']).optional(),
  TEMPORAL_TLS_CERT: z.string().min(1).optional(),
  TEMPORAL_TLS_KEY: z.string().min(1).optional(),
  TEMPORAL_TLS_CA: z.string().min(1).optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
  TILEBREAKER_TASK_QUEUE: z.string().min(1).default('tilebreaker'),
});

export interface TlsSettings {
  serverNameOverride?: string;
  serverRootCACertificate?: Buffer;
  clientCertPair?: { crt: Buffer; key: Buffer };
}

export interface ConnectionConfig {
  /** null: no server named; the caller may start a local dev server. */
  address: string | null;
  namespace: string;
  taskQueue: string;
  apiKey?: string;
  /** false: plaintext; true: TLS with system CAs; object: TLS settings. */
  tls: boolean | TlsSettings;
}

export function connectionConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ConnectionConfig {
  const picked = Object.fromEntries(
    Object.keys(envSchema.shape)
      .filter((k) => env[k] !== undefined && env[k] !== '')
      .map((k) => [k, env[k]]),
  );
  const e = parseOrThrow(envSchema, picked, 'Temporal connection settings');
  if (!!e.TEMPORAL_TLS_CERT !== !!e.TEMPORAL_TLS_KEY) {
    throw new Error(
      `Temporal connection settings: TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together (got TEMPORAL_TLS_CERT=${e.TEMPORAL_TLS_CERT ?? 'unset'}, TEMPORAL_TLS_KEY=${e.TEMPORAL_TLS_KEY ?? 'unset'})`,
    );
  }
  const wantsTls =
    e.TEMPORAL_TLS === 'true' ||
    e.TEMPORAL_TLS === '1' ||
    !!e.TEMPORAL_API_KEY ||
    !!e.TEMPORAL_TLS_CERT ||
    !!e.TEMPORAL_TLS_CA;
  let tls: boolean | TlsSettings = wantsTls;
  if (e.TEMPORAL_TLS_CERT || e.TEMPORAL_TLS_CA || e.TEMPORAL_TLS_SERVER_NAME) {
    tls = {
      ...(e.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: e.TEMPORAL_TLS_SERVER_NAME } : {}),
      ...(e.TEMPORAL_TLS_CA ? { serverRootCACertificate: readFileSync(e.TEMPORAL_TLS_CA) } : {}),
      ...(e.TEMPORAL_TLS_CERT && e.TEMPORAL_TLS_KEY
        ? { clientCertPair: { crt: readFileSync(e.TEMPORAL_TLS_CERT), key: readFileSync(e.TEMPORAL_TLS_KEY) } }
        : {}),
    };
  }
  return {
    address: e.TEMPORAL_ADDRESS ?? null,
    namespace: e.TEMPORAL_NAMESPACE,
    taskQueue: e.TILEBREAKER_TASK_QUEUE,
    ...(e.TEMPORAL_API_KEY ? { apiKey: e.TEMPORAL_API_KEY } : {}),
    tls,
  };
}
