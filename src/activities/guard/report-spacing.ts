import type { BreakerView } from '../../breaker';

/**
 * How often this process reports each key's outcomes: a fleet of N workers sharing a key sends the entity about
 * targetSignalsPerSecond reports a second whatever N is, by each worker reporting every
 * max(reportIntervalMs, N / targetSignalsPerSecond) seconds (at most maxReportIntervalMs), N being the count
 * of reporters the entity publishes in its view. Before any count is known (a key's first report) the next
 * report waits as long as the largest fleet would, until the first count read after it says how long.
 * Failures do not wait for the spacing when this process is among the fleet's flushers of the moment
 * (`FailureFlushes`): about failureFlushers of them each second, every worker in a fleet that small.
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

/**
 * What a key's first report assumes before the entity's count is read: a fleet this large (the longest
 * spacing). Wrong guesses cost little: the first count read after the report replaces it.
 */
export const GUESSED_REPORTERS = 1 << 20;
/**
 * A count read this soon after the first report does not replace the guess: a fleet starting together sends
 * its first reports within a second or so, and the entity's count reads low until it has taken them all in.
 */
export const GUESS_SETTLE_MS = 2_000;

/** The interval for a fleet of `reporters` (ms). */
export function reportEveryMs(reporters: number, o: SpacingOptions): number {
  const base = o.reportIntervalMs;
  if (!(o.targetSignalsPerSecond > 0) || !Number.isFinite(reporters) || reporters <= 1) return base;
  return Math.max(
    base,
    Math.min(Math.max(base, o.maxReportIntervalMs), (reporters * 1_000) / o.targetSignalsPerSecond),
  );
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
 * FLEET_MEMORY_MS; 1 (no spacing) for entities that publish none, and while none is known.
 */
export class FleetSizes {
  private readonly keys = new Map<string, { count: number; at: number; readAt: number }>();
  /** Keys whose last read found no entity (none yet, or it finished idle). */
  private readonly absent = new Set<string>();

  /** A view was read for `key` at `now`. */
  saw(key: string, view: BreakerView | null | undefined, now: number): void {
    if (view === undefined) return; // unreachable: keep what was known
    if (view === null) {
      this.keys.delete(key);
      this.absent.add(key);
      return;
    }
    this.absent.delete(key);
    const count = view.reporters;
    if (typeof count !== 'number' || !Number.isFinite(count)) {
      // An entity from before the count: report at the plain interval.
      this.keys.set(key, { count: 1, at: now, readAt: now });
      return;
    }
    const held = this.keys.get(key);
    if (!held || count >= held.count || now - held.at > FLEET_MEMORY_MS)
      this.keys.set(key, { count, at: now, readAt: now });
    else held.readAt = now;
  }

  /** The reporters sharing `key`, as this process last knew. */
  count(key: string): number {
    return this.keys.get(key)?.count ?? 1;
  }

  /** When a running entity's view of `key` was last read; 0 if none since the last read that found no entity. */
  readAt(key: string): number {
    return this.keys.get(key)?.readAt ?? 0;
  }

  /** The last read of `key` found no entity: whoever reports first starts it, and the fleet's size is unknown. */
  noEntity(key: string): boolean {
    return this.absent.has(key);
  }
}

/**
 * When each key's next report is due: the spacing for its fleet, jittered afresh each time. A key reported
 * early (a failure flush) is next due one interval after that. A key's first report, sent when the last read
 * found no entity (a fleet starting together, or a worker starting the entity alone), is next due as for the
 * largest fleet, until a count read GUESS_SETTLE_MS after it gives the spacing (with the same draw of jitter, so a fleet that
 * starts together stays spread); a count that grows after a report moves the next one out the same way. So a
 * fleet that starts at once sends one report each, then reports at its spacing, instead of every second until
 * each worker has read its size.
 */
export class ReportSchedule {
  private readonly due = new Map<
    string,
    { at: number; sentAt: number; every: number; draw: number; guessed: boolean }
  >();

  constructor(
    private readonly o: SpacingOptions,
    private readonly fleet: FleetSizes,
    private readonly rand: () => number = Math.random,
  ) {}

  /** The interval `key` reports at now (ms, before jitter): what its reports tell the entity. */
  everyMs(key: string): number {
    const d = this.due.get(key);
    if (this.guessing(key, d)) return reportEveryMs(GUESSED_REPORTERS, this.o);
    return reportEveryMs(this.fleet.count(key), this.o);
  }

  /** The reporters sharing `key` as this process knows them (1 when unknown). */
  reporters(key: string): number {
    return this.fleet.count(key);
  }

  /**
   * Whether `key`'s report is due at `now` (a key never reported is due). The sender asks once a
   * reportIntervalMs, so a report due within half of that is due now: at the plain interval every tick sends.
   */
  isDue(key: string, now: number): boolean {
    const d = this.due.get(key);
    if (!d) return true;
    const every = this.everyMs(key);
    // Scheduled on a guess, now known; or the fleet grew since: the interval it has now, with the same draw.
    if ((d.guessed && !this.guessing(key, d)) || every > d.every)
      return now + this.o.reportIntervalMs / 2 >= d.sentAt + this.spaced(every, d.draw);
    // The fleet may have shrunk since: never wait longer than the longest jittered interval it has now.
    return now + this.o.reportIntervalMs / 2 >= Math.min(d.at, d.sentAt + jittered(every, 1));
  }

  /** `key` reported at `now`: schedules the next one (jittered only when spaced past the plain interval). */
  reported(key: string, now: number): void {
    const prev = this.due.get(key);
    const guessed = prev === undefined && this.fleet.noEntity(key);
    const every = guessed ? reportEveryMs(GUESSED_REPORTERS, this.o) : reportEveryMs(this.fleet.count(key), this.o);
    const draw = this.rand();
    this.due.set(key, { at: now + this.spaced(every, draw), sentAt: now, every, draw, guessed });
  }

  /** The first report's guess holds (or would, for a first report now): no count was read GUESS_SETTLE_MS or more after it went. */
  private guessing(key: string, d: { sentAt: number; guessed: boolean } | undefined): boolean {
    if (!d) return this.fleet.noEntity(key);
    return d.guessed && this.fleet.readAt(key) < d.sentAt + GUESS_SETTLE_MS;
  }

  private spaced(every: number, draw: number): number {
    return every > this.o.reportIntervalMs ? jittered(every, draw) : every;
  }
}

/**
 * Which failing workers report their failures at once. A whole fleet sending its failures the moment an
 * outage starts loads the entity with one signal per worker twice a second, and its workflow tasks slow down
 * just when it must trip. So in a fleet of N reporters (the count the entity publishes), a worker whose recent
 * outcomes turn bad flushes at once with probability min(1, k / N) (k: failureFlushers), drawn afresh for each
 * second; the others keep their failures for their next spaced report, or for a later second they are drawn in.
 * About k workers flush each second whatever N is, never fewer than all of a fleet of k or fewer, and which
 * ones changes every second, so the entity hears from more than one reporter (the quorum's witnesses).
 */
export const FLUSH_DRAW_MS = 1_000;

export class FailureFlushes {
  constructor(
    /** Workers the fleet aims to have flushing at once each second (0 or less: every worker flushes). */
    private readonly k: number,
    /** A number in [0, 1) for a seed: the same for the same seed (default: a hash of it). */
    private readonly draw: (seed: string) => number = seededDraw,
  ) {}

  /** Whether `reporter`'s failures for `key` go at once at `now`, in a fleet of `reporters`. */
  flushesNow(reporter: string, key: string, reporters: number, now: number): boolean {
    if (!(this.k > 0) || !Number.isFinite(this.k) || !(reporters > this.k)) return true;
    return this.draw(`${reporter}\u0000${key}\u0000${Math.floor(now / FLUSH_DRAW_MS)}`) < this.k / reporters;
  }
}

/** FNV-1a over the seed's UTF-16 code units, then murmur3's finaliser (so near seeds land far apart), in [0, 1). */
export function seededDraw(seed: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) {
    h ^= seed.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 2 ** 32;
}
