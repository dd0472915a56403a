import type { BreakerView } from '../../breaker';
import type { WorkerMetrics } from './worker-metrics';

export interface StateGaugeOptions {
  /** How often the breakers this process used lately are read again for the gauge. Default 5 s. */
  refreshMs?: number;
  /** A breaker not used for this long is no longer shown (its series set to 0). Default 10 min. */
  forgetMs?: number;
}

/**
 * `tilebreaker_breaker_state` from this process's cached views. The guard reads a view only when a call
 * needs one, so an idle process would show the last state it saw for ever; instead every breaker used in
 * the last `forgetMs`, or last seen refusing (KEPT), is read again every `refreshMs` (through the guard's cache: at most one entity read
 * per refresh), and after that its series all go to 0 ("no view"), so `max by (endpoint, state)` over the
 * fleet is the state of the processes that still look.
 */
/**
 * States a breaker is kept in the gauge for until it leaves them: the stuck-open page (TilebreakerStuckOpen)
 * reads how long an endpoint has refused traffic, whether or not a run still asks for it. Once it closes, it is
 * shown closed for forgetMs more, then forgotten.
 */
const KEPT: ReadonlySet<string> = new Set(['open', 'half-open', 'forced-open']);

export class BreakerStateGauge {
  private readonly usedAt = new Map<string, number>();
  /** Keys last shown refusing (KEPT): read and shown until they close, however long since a call used them. */
  private readonly refusing = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private readonly forgetMs: number;

  constructor(
    private readonly metrics: WorkerMetrics,
    private readonly read: (key: string) => Promise<unknown>,
    opts: StateGaugeOptions = {},
  ) {
    this.forgetMs = opts.forgetMs ?? 600_000;
    this.timer = setInterval(() => this.refresh(), opts.refreshMs ?? 5_000);
    this.timer.unref();
  }

  /** A call to `key` was decided now. */
  used(key: string): void {
    this.usedAt.set(key, Date.now());
  }

  /** The guard read `key`'s view (null: no entity runs, which is closed). */
  shown(key: string, view: BreakerView | null): void {
    if (!this.usedAt.has(key)) return;
    const state = view ? view.state : 'closed';
    if (KEPT.has(state)) this.refusing.add(key);
    else if (this.refusing.delete(key)) this.usedAt.set(key, Date.now());
    this.metrics.breakerState(key, state);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private refresh(): void {
    const now = Date.now();
    for (const [key, at] of this.usedAt) {
      if (now - at > this.forgetMs && !this.refusing.has(key)) {
        this.usedAt.delete(key);
        this.metrics.breakerState(key, null);
      } else {
        // A failed read leaves the gauge as it was (the guard fails open and counts that).
        void this.read(key).catch(() => undefined);
      }
    }
  }
}
