import type { OutcomeKind } from '../../breaker';

/**
 * Where retries live: inside the fetch activity, per tile, for transient failures and service exceptions
 * (a truncated or garbled answer is worth one more try), with exponential backoff and full jitter, bounded
 * attempts, and at least the server's Retry-After. Never for permanent, neutral (404/204/401/403) outcomes.
 * Temporal's activity retry policy only re-runs an activity whose worker died; the activity resumes from its
 * heartbeat, so retries are never multiplied by two layers.
 */
export interface RetryPolicy {
  attempts: number;
  baseMs: number;
  capMs: number;
  /** The longest Retry-After honoured inside an activity; longer ones defer the tile instead. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, baseMs: 200, capMs: 5_000, maxRetryAfterMs: 30_000 };

export function retryable(kind: OutcomeKind): boolean {
  // A local failure (a resolver hiccup, descriptors exhausted) may pass; the guard's quarantine stops a worker
  // whose every call fails so.
  return kind === 'transient' || kind === 'service-exception' || kind === 'rate-limited' || kind === 'local';
}

/** Full jitter: uniform in [0, min(cap, base * 2^retry)), at least `retryAfterMs`. */
export function backoffMs(
  retry: number,
  policy: RetryPolicy,
  retryAfterMs = 0,
  rand: () => number = Math.random,
): number {
  return Math.max(retryAfterMs, rand() * Math.min(policy.capMs, policy.baseMs * 2 ** retry));
}
