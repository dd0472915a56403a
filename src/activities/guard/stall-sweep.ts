import { permitFor, type BreakerView } from '../../breaker';
import type { EntityLink } from './entity-link';
import type { InFlightCalls } from './in-flight';
import type { ReportSender } from './report-sender';
import type { GuardStats } from './types';

/** The guard's parts a stall sweep reads and drives. */
export interface StallSweepParts {
  calls: InFlightCalls;
  stats: GuardStats;
  reports: ReportSender;
  link: EntityLink;
  /** The entity's view for deciding: undefined when it cannot be read or is wedged (the guard's readView). */
  readView(key: string): Promise<BreakerView | null | undefined>;
  /** The fleet's stall threshold for `key` in the last view read, if it gave one. */
  fleetStallMs(key: string): number | undefined;
}

/**
 * Looks at the calls in flight (in-flight.ts) on a timer: each stall is reported as a failure while the call
 * waits, and stalled calls are aborted once the breaker is open.
 */
export class StallSweep {
  private readonly shedding = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly parts: StallSweepParts) {
    // Stalled calls are looked at four times a second: a hang is evidence within a quarter second of the threshold.
    this.timer = setInterval(() => this.sweep(), 250);
    this.timer.unref();
  }

  /** Stops the timer; a state read in flight acts on nothing once it returns. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  private sweep(): void {
    if (this.stopped) return;
    const { calls, stats, reports, link } = this.parts;
    for (const [key, stalls] of calls.sweep(Date.now(), (key) => this.parts.fleetStallMs(key))) {
      stats.stalled += stalls;
      reports.add(key, { stalls });
    }
    // Tracked, so close() waits for a state read in flight instead of leaving it to a closed connection.
    for (const key of calls.stalledKeys()) link.track(this.shedIfOpen(key));
  }

  /** Stalled calls wait on nobody's behalf once the breaker is open: abort them (read the state, then act). */
  private async shedIfOpen(key: string): Promise<void> {
    if (this.shedding.has(key)) return;
    this.shedding.add(key);
    const { stats, calls } = this.parts;
    try {
      const view = await this.parts.readView(key);
      if (!view || this.stopped) return;
      const p = permitFor(view, Date.now());
      if (!p.allow) stats.shed += calls.abortStalled(key, `breaker ${p.state}: the call stalled and was abandoned`);
    } catch {
      // The state could not be read: the calls go on until they end or time out, as when failing open.
    } finally {
      this.shedding.delete(key);
    }
  }
}
