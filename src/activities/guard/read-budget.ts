/**
 * This process's reads of entity views (DescribeWorkflowExecution), bounded across all its keys: each key's
 * view is kept for max(cacheTtlMs, activeKeys / maxReadsPerSecond) so the process describes at most about
 * maxReadsPerSecond times a second however many keys it uses, the keys in use sharing the budget. A key is in
 * use while it was asked for within ACTIVE_FOR_MS. Reads forced by this process's own failures (the view
 * cache's invalidate after a failure report) are not held back: that is how detection stays fast.
 */
export const ACTIVE_FOR_MS = 5_000;
/** The set of keys in use is swept at most this often (a call asks for its key's view every time). */
const SWEEP_EVERY_MS = 250;

export class ReadBudget {
  private readonly used = new Map<string, number>();
  private sweptAt = 0;
  private active = 0;

  /** `maxReadsPerSecond`: 0 or less (or not finite) lifts the bound: each key is read every cacheTtlMs. */
  constructor(private readonly maxReadsPerSecond: number) {}

  /** How long `key`'s view is kept (ms) when asked for at `now`; `floorMs`: the cache's own TTL. */
  ttlMs(key: string, now: number, floorMs: number): number {
    const fresh = !this.used.has(key);
    this.used.set(key, now);
    if (fresh) this.active++;
    if (fresh || now - this.sweptAt >= SWEEP_EVERY_MS) this.sweep(now);
    if (!(this.maxReadsPerSecond > 0) || !Number.isFinite(this.maxReadsPerSecond)) return floorMs;
    return Math.max(floorMs, (this.active * 1_000) / this.maxReadsPerSecond);
  }

  /** Keys asked for within ACTIVE_FOR_MS. */
  activeKeys(): number {
    return this.active;
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [k, at] of this.used) if (now - at > ACTIVE_FOR_MS) this.used.delete(k);
    this.active = this.used.size;
  }
}
