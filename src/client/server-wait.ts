import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A worker started before its Temporal server (a compose or Kubernetes roll-out, a server restart) waits for it
 * instead of exiting: `attempt` (connect, create the worker) is retried with a capped exponential backoff. It
 * says so once when it starts waiting, and once when the server answers, never a line per attempt.
 */
export interface ServerWaitOptions {
  /** Where the two lines go (stderr in the CLI). */
  say(line: string): void;
  /** What is being waited for, for the lines: e.g. `the Temporal server at 127.0.0.1:7233 (namespace default)`. */
  what: string;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Stop waiting (SIGINT / SIGTERM): the last error is thrown. */
  signal?: AbortSignal;
  now?: () => number;
}

/**
 * Errors a server that is down or still starting gives: no connection, or the namespace not registered yet.
 * Anything else (a bad API key, a refused TLS handshake that names a certificate, a bug) is not waited out.
 */
export function serverNotReady(err: unknown): boolean {
  const cause = err instanceof Error ? (err as { cause?: unknown }).cause : undefined;
  const text = err instanceof Error ? `${err.message} ${cause instanceof Error ? cause.message : ''}` : String(err);
  return /cannot reach the Temporal server|Connection refused|ConnectError|UNAVAILABLE|Namespace .* (was )?not found|NamespaceNotFound|deadline exceeded|transport error/i.test(
    text,
  );
}

export async function untilServerReady<T>(attempt: () => Promise<T>, opts: ServerWaitOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const started = now();
  let delay = opts.initialDelayMs ?? 500;
  const maxDelay = opts.maxDelayMs ?? 15_000;
  let tries = 0;
  for (;;) {
    tries++;
    try {
      const out = await attempt();
      if (tries > 1)
        opts.say(
          `tilebreaker worker: ${opts.what} answered after ${Math.round((now() - started) / 100) / 10} s (${tries} attempts)`,
        );
      return out;
    } catch (err) {
      if (!serverNotReady(err) || opts.signal?.aborted) throw err;
      if (tries === 1) {
        const why = err instanceof Error ? err.message : String(err);
        opts.say(
          `tilebreaker worker: waiting for ${opts.what}, retrying with backoff up to ${maxDelay / 1000} s: ${why}`,
        );
      }
      await sleep(delay, undefined, opts.signal ? { signal: opts.signal } : {}).catch(() => undefined);
      if (opts.signal?.aborted) throw err;
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}

/** gRPC status codes that say the server was not reached, or not in time (as the guard's reachability reads them). */
const NOT_REACHED = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */]);

/**
 * Whether a failed call means the Temporal server is unreachable for now (down, restarting, a network blip):
 * a gRPC UNAVAILABLE or DEADLINE_EXCEEDED anywhere in the error's causes, or what `serverNotReady` waits out
 * for a starting worker. An answer (not found, permission denied, a failed workflow) is not.
 */
export function temporalUnreachable(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number') return NOT_REACHED.has(code);
  }
  return serverNotReady(err);
}

/** How long a command waiting on a workflow goes on with the server unreachable before it gives up (docs/cli.md). */
export const DEFAULT_UNREACHABLE_LIMIT_MS = 10 * 60_000;

export interface OutageOptions {
  /** Where the lines go (stderr in the CLI). */
  say(line: string): void;
  /** What is waited for, for the lines: e.g. `mosaic/alps-1a2b3c4d`. */
  what: string;
  /** Give up once the server has been unreachable this long (default DEFAULT_UNREACHABLE_LIMIT_MS). */
  giveUpAfterMs?: number;
  /** The back-off between tries: from this (default 1 s), doubling up to maxDelayMs (default 10 s). */
  initialDelayMs?: number;
  maxDelayMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** A command gave up waiting: the server stayed unreachable past the bound. The workflow may well go on. */
export class TemporalUnreachableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TemporalUnreachableError';
  }
}

/** The line-worthy reason: the gRPC error's own message (e.g. `14 UNAVAILABLE: No connection established`). */
function reason(err: unknown): string {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (typeof (e as { code?: unknown }).code === 'number') return e.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * Calls `call` until the server answers it. A command that waits on a workflow (watch, --wait, seed) rides out
 * a server restart this way: while the server is unreachable it says so once, backs off (1 s doubling to
 * 10 s) and calls again; once the server answers it says so and returns that answer. Past `giveUpAfterMs`
 * unreachable it throws TemporalUnreachableError. Any other error is thrown at once.
 */
export async function throughOutages<T>(call: () => Promise<T>, opts: OutageOptions): Promise<T> {
  const now = opts.now ?? Date.now;
  const sleepFor = opts.sleep ?? ((ms: number) => sleep(ms));
  const limit = opts.giveUpAfterMs ?? DEFAULT_UNREACHABLE_LIMIT_MS;
  const maxDelay = opts.maxDelayMs ?? 10_000;
  let delay = opts.initialDelayMs ?? 1_000;
  let since: number | null = null;
  for (;;) {
    try {
      const out = await call();
      if (since !== null)
        opts.say(
          `Temporal answered again after ${Math.round((now() - since) / 1000)} s; carrying on with ${opts.what}`,
        );
      return out;
    } catch (err) {
      if (!temporalUnreachable(err)) throw err;
      const first = since === null;
      since ??= now();
      const down = now() - since;
      if (first)
        opts.say(
          `Temporal unreachable (${reason(err)}); still waiting for ${opts.what}, retrying (gives up after ${Math.round(limit / 1000)} s unreachable)`,
        );
      if (down >= limit) {
        throw new TemporalUnreachableError(
          `Temporal unreachable for ${Math.round(down / 1000)} s (${reason(err)}); gave up waiting for ${opts.what}, which may still be running: follow it again once the server is back`,
          { cause: err },
        );
      }
      await sleepFor(Math.min(delay, limit - down));
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}
