/** gRPC status codes that say the server was not reached, or not in time (not that it refused the request). */
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;

/**
 * Whether a failed call to Temporal means the server cannot be reached: a gRPC DEADLINE_EXCEEDED or
 * UNAVAILABLE anywhere in the error's causes, or no gRPC status at all (a closed channel, no answer).
 * Another status (permission denied, a bad request) is an answer: the server is there.
 */
export function isUnreachable(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number') return code === DEADLINE_EXCEEDED || code === UNAVAILABLE;
  }
  return true;
}

/**
 * Whether Temporal answers this process at all, as its reads of the entities tell. After a read that found
 * the server unreachable, every key fails open at once (no call waits out another timeout) and each key's
 * next read goes on in the background, spaced by a back-off that doubles from 1 s up to `maxRecheckMs`;
 * the first read that gets an answer ends it.
 */
export class Reachability {
  private failures = 0;

  constructor(private readonly maxRecheckMs: number) {
    if (!(Number.isFinite(maxRecheckMs) && maxRecheckMs > 0))
      throw new RangeError(`unreachableRecheckMs must be a number of ms > 0 (got ${maxRecheckMs})`);
  }

  /** A read failed with `err`: how long the key waits before it is read again. */
  failed(err: unknown): number {
    if (isUnreachable(err)) this.failures++;
    const streak = Math.max(1, this.failures);
    return Math.min(this.maxRecheckMs, 1_000 * 2 ** Math.min(streak - 1, 16));
  }

  /** The server answered a read (a view, or "no such entity"). */
  answered(): void {
    this.failures = 0;
  }

  /** The last read found the server unreachable, and none has been answered since. */
  get down(): boolean {
    return this.failures > 0;
  }
}
