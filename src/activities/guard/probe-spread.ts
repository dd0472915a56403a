import type { BreakerView } from '../../breaker';

/**
 * Spreads the fleet's probe-token requests. A cooldown ends at the same instant for every process (they all
 * hold the same `cooldownUntil`), so without this every process asks the entity for the token at once: a burst
 * of signals the entity must answer one by one, all but one refused. Each process waits its own fixed share of
 * `spreadMs` (its jitter, in [0, 1)) from the moment the half-open began before asking; the guard then reads the
 * state again, and a process that finds the token out refuses without asking.
 */
export class ProbeSpread {
  /** When this process first saw each key half-open with a token free (for views that no longer say when it began). */
  private readonly firstSeen = new Map<string, number>();

  constructor(
    private readonly spreadMs: number,
    private readonly jitter: number,
  ) {
    if (!(Number.isFinite(spreadMs) && spreadMs >= 0)) throw new RangeError(`probeSpreadMs must be a number of ms >= 0 (got ${spreadMs})`);
    if (!(jitter >= 0 && jitter < 1)) throw new RangeError(`probeJitter must be in [0, 1) (got ${jitter})`);
  }

  /** How long this process still waits before asking for `key`'s token (0: ask now). */
  waitMs(key: string, view: BreakerView | null, now: number): number {
    if (!(this.spreadMs > 0)) return 0;
    return Math.max(0, this.since(key, view, now) + this.jitter * this.spreadMs - now);
  }

  /** Not half-open with a token free (any more): the next time it is starts a new spread. */
  clear(key: string): void {
    this.firstSeen.delete(key);
  }

  /** When the half-open began, as far as this process can tell. */
  private since(key: string, view: BreakerView | null, now: number): number {
    // A view still showing the cooldown (or timed force-open) says when it ended: the same instant fleet-wide.
    const ended = view?.state === 'open' ? view.cooldownUntil : view?.state === 'forced-open' ? view.forcedUntil : null;
    if (ended !== null && ended !== undefined && ended <= now) return ended;
    // A view that says half-open already: from when this process first saw it so.
    let seen = this.firstSeen.get(key);
    if (seen === undefined) this.firstSeen.set(key, (seen = now));
    return seen;
  }
}
