/**
 * The calls `run` lets through to one key at once in this process: `concurrency`, times the breaker's ramp
 * allowance after a recovery (at least one), as the tile fetcher scales a source's concurrency. A call waits
 * here for a slot before the guard decides it, so its time in flight (the stall clock) starts only when it can
 * go out. The allowance is the one the key's last decision carried: a decision is made after the slot is taken.
 */
export class RunSlots {
  private readonly keys = new Map<string, { active: number; allowance: number; waiters: (() => void)[] }>();

  private of(key: string) {
    let k = this.keys.get(key);
    if (!k) this.keys.set(key, (k = { active: 0, allowance: 1, waiters: [] }));
    return k;
  }

  /** Calls to `key` that may be in flight now. */
  limit(key: string, concurrency: number): number {
    return Math.max(1, Math.ceil(concurrency * this.of(key).allowance));
  }

  /** Waits for a slot (in turn); resolves to its release, or rejects with the signal's reason when it is aborted first. */
  async take(key: string, concurrency: number, signal?: AbortSignal): Promise<() => void> {
    const k = this.of(key);
    while (k.active >= this.limit(key, concurrency)) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          const at = k.waiters.indexOf(done);
          if (at >= 0) k.waiters.splice(at, 1);
          resolve();
        };
        k.waiters.push(done);
        signal?.addEventListener('abort', done, { once: true });
        // A growing allowance lets more through with no call ending: look again now and then.
        setTimeout(done, 250).unref();
      });
    }
    k.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      k.active--;
      k.waiters.shift()?.();
      if (k.active === 0 && k.waiters.length === 0 && k.allowance >= 1) this.keys.delete(key);
    };
  }

  /** The ramp allowance a decision for `key` carried. */
  allowed(key: string, allowance: number): void {
    this.of(key).allowance = Math.min(1, Math.max(0, allowance));
  }
}
