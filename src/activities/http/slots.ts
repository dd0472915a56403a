/**
 * A counting semaphore, first come first served: `n` holders at a time, the rest queue. An aborted waiter
 * leaves the queue and gets null.
 */
export class Slots {
  private held = 0;
  private readonly waiting: { grant: () => void; signal?: AbortSignal; onAbort?: () => void }[] = [];

  constructor(private readonly n: number) {}

  /** A slot, or null when `signal` aborts first. Call `release()` exactly once. */
  acquire(signal?: AbortSignal): Promise<{ release(): void } | null> {
    if (signal?.aborted) return Promise.resolve(null);
    if (this.held < this.n) {
      this.held++;
      return Promise.resolve(this.slot());
    }
    return new Promise((resolve) => {
      const waiter: (typeof this.waiting)[number] = {
        grant: () => {
          if (waiter.onAbort) signal?.removeEventListener('abort', waiter.onAbort);
          resolve(this.slot());
        },
      };
      if (signal) {
        waiter.onAbort = () => {
          const k = this.waiting.indexOf(waiter);
          if (k >= 0) this.waiting.splice(k, 1);
          resolve(null);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.waiting.push(waiter);
    });
  }

  /** Holders now, and waiters queued behind them. */
  get usage(): { held: number; queued: number } {
    return { held: this.held, queued: this.waiting.length };
  }

  private slot(): { release(): void } {
    let done = false;
    return {
      release: () => {
        if (done) return;
        done = true;
        const next = this.waiting.shift();
        // The slot passes straight to the next waiter: held stays the same.
        if (next) next.grant();
        else this.held--;
      },
    };
  }
}
