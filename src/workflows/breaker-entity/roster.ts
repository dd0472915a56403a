/**
 * The workers heard from lately, by reporter id, and when: they share a rate-limited endpoint's rate. Counting
 * is pure, because queries count (a query that changed state would make a replay differ from the run); only
 * events (a report, a continue-as-new) forget the workers not heard from within the TTL, so the map stays as
 * small as the live fleet whether or not the endpoint has a rate limit.
 */
export class Roster {
  private readonly seen: Map<string, number>;

  constructor(
    carried: readonly (readonly [string, number])[] | undefined,
    private readonly ttlMs: number,
  ) {
    this.seen = new Map(carried ?? []);
  }

  /**
   * A report from `id` at `now` (an event: forgets the stale ids too). `lingerMs`: a reporter that reports
   * rarely stays counted that much longer than the TTL, kept as a later time heard (so the carried form, pairs
   * of id and time, holds it with no new field).
   */
  heard(id: string, now: number, lingerMs = 0): void {
    this.prune(now);
    this.seen.set(id, now + lingerMs);
  }

  /** Workers heard from within the TTL; changes nothing. */
  active(now: number): number {
    let n = 0;
    for (const at of this.seen.values()) if (now - at <= this.ttlMs) n++;
    return n;
  }

  /** Forgets the workers not heard from within the TTL (event handlers only, never queries). */
  prune(now: number): void {
    for (const [id, at] of this.seen) if (now - at > this.ttlMs) this.seen.delete(id);
  }

  get size(): number {
    return this.seen.size;
  }

  entries(): [string, number][] {
    return [...this.seen];
  }
}

/** `n` rounded up to a power of two (0 stays 0): a count that moves only when the fleet doubles or halves. */
export function coarseCount(n: number): number {
  if (n <= 0) return 0;
  let c = 1;
  while (c < n) c *= 2;
  return c;
}
