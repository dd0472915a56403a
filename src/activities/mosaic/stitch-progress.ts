/** The stitcher's progress calls (activity heartbeats), kept flowing through its long encodes. */

/** How often onProgress repeats its last count. */
const KEEPALIVE_MS = 5_000;

/** onProgress calls, repeated on a timer so slow steps still heartbeat; an error thrown by the callback fails the stitch. */
export class Progress {
  private readonly timer: NodeJS.Timeout | undefined;
  private last = 0;
  private error: { err: unknown } | undefined;

  constructor(private readonly onProgress: ((rowsDone: number) => void) | undefined) {
    if (onProgress) {
      this.timer = setInterval(() => this.call(this.last), KEEPALIVE_MS);
      this.timer.unref();
    }
  }

  report(rowsDone: number): void {
    this.last = rowsDone;
    this.call(rowsDone);
    this.check();
  }

  /** Throws what the callback threw (the timer cannot throw into the encode it runs beside). */
  check(): void {
    if (this.error) throw this.error.err;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private call(rowsDone: number): void {
    if (!this.onProgress || this.error) return;
    try {
      this.onProgress(rowsDone);
    } catch (err) {
      this.error = { err };
    }
  }
}
