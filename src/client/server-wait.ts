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
  return /cannot reach the Temporal server|Connection refused|ConnectError|UNAVAILABLE|Namespace .* (was )?not found|NamespaceNotFound|deadline exceeded|transport error/i.test(text);
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
      if (tries > 1) opts.say(`tilebreaker worker: ${opts.what} answered after ${Math.round((now() - started) / 100) / 10} s (${tries} attempts)`);
      return out;
    } catch (err) {
      if (!serverNotReady(err) || opts.signal?.aborted) throw err;
      if (tries === 1) {
        const why = err instanceof Error ? err.message : String(err);
        opts.say(`tilebreaker worker: waiting for ${opts.what}, retrying with backoff up to ${maxDelay / 1000} s: ${why}`);
      }
      await sleep(delay, undefined, opts.signal ? { signal: opts.signal } : {}).catch(() => undefined);
      if (opts.signal?.aborted) throw err;
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}
