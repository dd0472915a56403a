import type { BreakerView } from '../../breaker';

/**
 * How often this process reports each key's outcomes: a fleet of N workers sharing a key sends the entity about
 * targetSignalsPerSecond reports a second whatever N is, by each worker reporting every
 * max(reportIntervalMs, N / targetSignalsPerSecond) seconds (at most maxReportIntervalMs), N being the count
 * of reporters the entity publishes in its view. Failures do not wait for it (report-sender.ts's failure
 * flush), so detection is as fast as with one worker.
 */
export interface SpacingOptions {
  /** The shortest interval, and the one used with entities that publish no reporter count (ms). */
  reportIntervalMs: number;
  /** The fleet's reports to one key per second that the spacing aims at. */
  targetSignalsPerSecond: number;
  /** The longest interval (ms), whatever the fleet's size. */
  maxReportIntervalMs: number;
}

/** How long the largest count the entity published is kept (ms): a dip (a continue-as-new) does not shorten the spacing at once. */
export const FLEET_MEMORY_MS = 60_000;
/** Each interval is drawn in [1 - JITTER, 1 + JITTER] x the spacing: workers that start together do not report together. */
export const JITTER = 0.2;

/** The interval for a fleet of `reporters` (ms). */
export function reportEveryMs(reporters: number, o: SpacingOptions): number {
  const base = o.reportIntervalMs;
  if (!(o.targetSignalsPerSecond > 0) || !Number.isFinite(reporters) || reporters <= 1) return base;
  return Math.max(base, Math.min(Math.max(base, o.maxReportIntervalMs), (reporters * 1_000) / o.targetSignalsPerSecond));
}

/**
 * How long after its last report this process is still among the key's reporters, with a margin (ms): the
 * entity keeps a reporter max(5 s, 2 x its interval + 1 s), and a process that must stay counted (a rate's
 * sharer) reports again 2 s before that.
 */
export function countedForMs(everyMs: number): number {
  return Math.max(3_000, 2 * everyMs - 1_000);
}

/** `everyMs` with its jitter, `rand` in [0, 1). */
export function jittered(everyMs: number, rand: number): number {
  return everyMs * (1 - JITTER + 2 * JITTER * rand);
}

/**
 * Each key's reporter count as the entity publishes it (`view.reporters`), the largest seen within
 * FLEET_MEMORY_MS; 1 (no spacing) for entities that publish none.
 */
export class FleetSizes {
  private readonly keys = new Map<string, { count: number; at: number }>();

  /** A view was read for `key` at `now`. */
  saw(key: string, view: BreakerView | null | undefined, now: number): void {
    const count = view?.reporters;
    if (typeof count !== 'number' || !Number.isFinite(count)) {
      // An entity from before the count (or none yet): report at the plain interval.
      if (view !== undefined) this.keys.delete(key);
      return;
    }
    const held = this.keys.get(key);
    if (!held || count >= held.count || now - held.at > FLEET_MEMORY_MS) this.keys.set(key, { count, at: now });
  }

  /** The reporters sharing `key`, as this process last knew. */
  count(key: string): number {
    return this.keys.get(key)?.count ?? 1;
  }
}

/**
 * When each key's next report is due: the spacing for its fleet, jittered afresh each time. A key reported
 * early (a failure flush) is next due one interval after that.
 */
export class ReportSchedule {
  private readonly due = new Map<string, { at: number; sentAt: number }>();

  constructor(
    private readonly o: SpacingOptions,
    private readonly fleet: FleetSizes,
    private readonly rand: () => number = Math.random,
  ) {}

  /** The interval `key` reports at now (ms, before jitter): what its reports tell the entity. */
  everyMs(key: string): number {
    return reportEveryMs(this.fleet.count(key), this.o);
  }

  /**
   * Whether `key`'s report is due at `now` (a key never reported is due). The sender asks once a
   * reportIntervalMs, so a report due within half of that is due now: at the plain interval every tick sends.
   */
  isDue(key: string, now: number): boolean {
    const d = this.due.get(key);
    if (!d) return true;
    // The fleet may have shrunk since: never wait longer than the longest jittered interval it has now.
    return now + this.o.reportIntervalMs / 2 >= Math.min(d.at, d.sentAt + jittered(this.everyMs(key), 1));
  }

  /** `key` reported at `now`: schedules the next one (jittered only when spaced past the plain interval). */
  reported(key: string, now: number): void {
    const every = this.everyMs(key);
    this.due.set(key, { at: now + (every > this.o.reportIntervalMs ? jittered(every, this.rand()) : every), sentAt: now });
  }
}
