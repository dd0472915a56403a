/** How long a call that may succeed later is retried: a store restarting, a connection reset, throttling. */
export const STORE_RETRY_MS = 30_000;
/** The longest wait between two tries. */
const MAX_DELAY_MS = 2_000;

/** What the SDK tells a retry strategy of a failed try (its `RetryErrorInfo`). */
interface RetryErrorInfo {
  errorType: 'TRANSIENT' | 'THROTTLING' | 'SERVER_ERROR' | 'CLIENT_ERROR';
  error?: unknown;
}

class Token {
  constructor(
    private readonly count: number,
    private readonly delay: number,
    readonly firstAt: number,
  ) {}
  getRetryCount(): number {
    return this.count;
  }
  getRetryDelay(): number {
    return this.delay;
  }
}

/**
 * The S3 client's retries, in place of the SDK's standard ones. Those give up after a few seconds at random
 * (full jitter over 8 tries) and share one quota per client that a burst of failures empties: when a bucket
 * restarts under a fleet writing tiles, every call then fails at once, its tiles already fetched, and their
 * batches are retried, asking the tile server for them again. Here each call waits out a transient failure
 * for STORE_RETRY_MS, backing off to MAX_DELAY_MS, on its own; an error that will not change (a denied key, a
 * missing bucket) is thrown at once.
 */
export class StoreRetry {
  constructor(
    private readonly budgetMs = STORE_RETRY_MS,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  acquireInitialRetryToken(_scope: string): Promise<Token> {
    return Promise.resolve(new Token(0, 0, this.now()));
  }

  refreshRetryTokenForRetry(token: Token, info: RetryErrorInfo): Promise<Token> {
    const retryable = info.errorType === 'TRANSIENT' || info.errorType === 'THROTTLING';
    const n = token.getRetryCount() + 1;
    // Half the backoff fixed, half at random: calls that failed together do not come back together.
    const delay = Math.min(MAX_DELAY_MS, 100 * 2 ** (n - 1)) * (0.5 + this.random() / 2);
    // The SDK throws the call's own error whatever this rejects with.
    if (!retryable || this.now() + delay - token.firstAt > this.budgetMs)
      return Promise.reject(info.error instanceof Error ? info.error : new Error('S3: not retried'));
    return Promise.resolve(new Token(n, delay, token.firstAt));
  }

  recordSuccess(_token: Token): void {}
}
