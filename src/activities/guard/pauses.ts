/**
 * The waits 429s asked for, per key: this process's own, known the moment the answer arrives, and the fleet's,
 * published by the entity in its view (`pacedUntil`) once a report carried one. The later of the two holds.
 */
export class Pauses {
  private readonly own = new Map<string, number>();

  /** `capMs`: the longest pause one answer may ask for (the policy's own cap, the longest cooldown). */
  constructor(private readonly capMs: number) {}

  /** A 429 from `key` asked this process to wait `retryAfterMs` from `now`. */
  rateLimited(key: string, retryAfterMs: number, now: number): void {
    if (!(Number.isFinite(retryAfterMs) && retryAfterMs > 0)) return;
    const until = now + Math.min(retryAfterMs, this.capMs);
    if (until > (this.own.get(key) ?? 0)) this.own.set(key, until);
  }

  /** The end of this process's own pause for `key` (0: none left at `now`); the view's is decide.ts's to weigh. */
  until(key: string, now: number): number {
    const own = this.own.get(key) ?? 0;
    if (own && own <= now) this.own.delete(key);
    return own > now ? own : 0;
  }
}
