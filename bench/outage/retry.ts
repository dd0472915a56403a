import { isFailure, type OutcomeKind } from '../../src/breaker/outcome';
import { now, sleep } from './clock';
import type { AttemptError, RetryOptions } from './types';

/** The result of one attempt, as the retry policy needs it. */
export interface AttemptOutcome {
  kind: OutcomeKind;
  latencyMs: number;
  /** An upstream Retry-After, in ms, when the answer carried one. */
  retryAfterMs?: number;
  /** How the transport failed, when it did. */
  error?: AttemptError | null;
}

/**
 * Full-jitter exponential backoff (the "Full Jitter" of AWS's backoff study): the wait before retry
 * `retryIndex` (0 for the first retry) is uniform in [0, min(capMs, baseMs * 2^retryIndex)).
 */
export function backoffMs(retryIndex: number, opts: RetryOptions, rand: () => number = Math.random): number {
  return rand() * Math.min(opts.capMs, opts.baseMs * 2 ** retryIndex);
}

/**
 * The one retry policy under every mode: up to `attempts` attempts; retries only failures (transient and
 * service-exception, the breaker's notion of failure); waits a full-jitter backoff between attempts, at least
 * an upstream Retry-After when one came (still capped at capMs); never starts a retry after `deadline`.
 * Returns the last attempt's outcome and how many attempts were made.
 */
export async function withRetry(
  attempt: (attemptIndex: number) => Promise<AttemptOutcome>,
  opts: RetryOptions,
  attempts: number = opts.attempts,
  deadline: number = Number.POSITIVE_INFINITY,
): Promise<{ last: AttemptOutcome; attempts: number }> {
  for (let i = 0; ; i++) {
    const last = await attempt(i);
    if (!isFailure(last.kind) || i + 1 >= attempts) return { last, attempts: i + 1 };
    let wait = backoffMs(i, opts);
    if (last.retryAfterMs !== undefined) wait = Math.min(opts.capMs, Math.max(wait, last.retryAfterMs));
    if (now() + wait >= deadline) return { last, attempts: i + 1 };
    await sleep(wait);
  }
}
