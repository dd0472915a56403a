/**
 * The calls `run` lets through to one key at once in this process: `concurrency`, times the breaker's ramp
 * allowance after a recovery (at least one), as the tile fetcher scales a source's concurrency. A call waits
 * here for a slot before the guard decides it, so its time in flight (the stall clock) starts only when it can
 * go out. The allowance is the one the key's last decision carried: a decision is made after the slot is taken.
 * Waiting calls get their slots in turn, handed over as calls end or as the allowance grows.
 */
interface KeySlots {
  active: number;
  allowance: number;
  /** The concurrency the key's last caller asked for. */
  concurrency: number;
  waiters: (() => void)[];
}

export class RunSlots {
  private readonly keys = new Map<string, KeySlots>();

  private of(key: string): KeySlots {
    let k = this.keys.get(key);
    if (!k) this.keys.set(key, (k = { active: 0, allowance: 1, concurrency: 1, waiters: [] }));
    return k;
  }

  /** Calls to `key` that may be in flight now. */
  limit(key: string, concurrency: number): number {
    return Math.max(1, Math.ceil(concurrency * this.of(key).allowance));
  }

  /** Waits for a slot, in turn; resolves to its release, or rejects with the signal's reason when it is aborted first. */
  async take(key: string, concurrency: number, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    const k = this.of(key);
    k.concurrency = concurrency;
    if (k.waiters.length === 0 && k.active < this.limit(key, concurrency)) k.active++;
    else {
      await new Promise<void>((resolve, reject) => {
        const granted = () => {
          signal?.removeEventListener('abort', aborted);
          resolve();
        };
        const aborted = () => {
          const at = k.waiters.indexOf(granted);
          if (at >= 0) k.waiters.splice(at, 1);
          const why: unknown = signal!.reason;
          reject(why instanceof Error ? why : new Error(`run: aborted while waiting for a slot: ${String(why)}`));
        };
        k.waiters.push(granted);
        signal?.addEventListener('abort', aborted, { once: true });
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      k.active--;
      this.pump(key, k);
    };
  }

  /** The ramp allowance a decision for `key` carried: a growing one lets waiting calls through. */
  allowed(key: string, allowance: number): void {
    const k = this.of(key);
    k.allowance = Math.min(1, Math.max(0, allowance));
    this.pump(key, k);
  }

  /** Hands free slots to waiting calls, oldest first (the slot is theirs before they run: nobody overtakes them). */
  private pump(key: string, k: KeySlots): void {
    while (k.waiters.length && k.active < this.limit(key, k.concurrency)) {
      k.active++;
      k.waiters.shift()!();
    }
  }
}
