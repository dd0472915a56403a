/**
 * Spreads the fleet's probe-token requests. A cooldown ends at the same instant for every process (they all
 * hold the same `cooldownUntil`), so without this every process asks the entity for the token at once: a burst
 * of signals the entity must answer one by one, all but one refused. Each process waits its own fixed share of
 * `spreadMs` (its jitter, in [0, 1)) from the moment the half-open began before asking; the guard then reads the
 * state again, and a process that finds the token out refuses without asking. The wait itself is decide.ts's
 * (`probeSpread`); this holds what it remembers per key.
 */
export class ProbeSpread {
  /** When this process first saw each key half-open with a token free (for views that no longer say when it began). */
  private readonly firstSeen = new Map<string, number>();

  /** Checks the options the spread is taken from (`spreadMs`, and this process's share of it, `jitter`). */
  constructor(spreadMs: number, jitter: number) {
    if (!(Number.isFinite(spreadMs) && spreadMs >= 0))
      throw new RangeError(`probeSpreadMs must be a number of ms >= 0 (got ${spreadMs})`);
    if (!(jitter >= 0 && jitter < 1)) throw new RangeError(`probeJitter must be in [0, 1) (got ${jitter})`);
  }

  /** When this process first saw `key` half-open with a token free, if it did (decide.ts reads it). */
  since(key: string): number | undefined {
    return this.firstSeen.get(key);
  }

  /** Remembers `at` as when this process first saw `key` half-open with a token free. */
  saw(key: string, at: number): void {
    this.firstSeen.set(key, at);
  }

  /** Not half-open with a token free (any more): the next time it is starts a new spread. */
  clear(key: string): void {
    this.firstSeen.delete(key);
  }
}
