/**
 * The SDK waits 5 s (fixed, in its core) for an ephemeral Temporal server to accept connections, then kills
 * it. A loaded machine sometimes needs longer: a start that timed out that way is tried again, up to
 * `attempts` times in all. Any other error is thrown at once.
 */
export async function withStartRetries<T>(
  start: () => Promise<T>,
  attempts = 3,
  onRetry: (err: Error, attempt: number) => void = () => {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= attempts || !isStartupTimeout(err)) throw err;
      onRetry(err as Error, attempt);
    }
  }
}

/** The SDK's "ephemeral server at … did not start within 5s" (the process is killed before it throws). */
export function isStartupTimeout(err: unknown): boolean {
  return err instanceof Error && /ephemeral server at \S+ did not start within/.test(err.message);
}
