import { STALL_DEVIATIONS, stallAfterMs } from '../../breaker';

/** How a guard tells a stalled call from a slow one (see InFlightCalls). */
export interface StallOptions {
  /**
   * A call counts as stalled once in flight longer than the p95 latency of this process's recent successes to
   * the key plus this many mean absolute deviations of them. Default 4.
   */
  deviations?: number;
  /** ... but never sooner than this. Default 1 000 ms. */
  floorMs?: number;
  /**
   * The threshold before this process has seen MIN_LEARNED successes of the key, or the fleet's threshold from
   * the view (from every worker's recent calls) when that is longer. Default 5 000 ms.
   */
  initialMs?: number;
}

/** Successes of a key needed before its own latency sets the stall threshold. */
const MIN_LEARNED = 8;
/** Recent success latencies kept per key. */
const LEARNED = 64;
/** A decision never released nor abandoned (a caller's bug) stops counting after this long. */
const FORGET_AFTER_MS = 30 * 60_000;

interface Call {
  key: string;
  startedAt: number;
  /** Stall periods already counted as failures. */
  stalls: number;
  /** Of those, the ones counted before the call was sent again (restart): periods now run from startedAt. */
  before: number;
  /** Aborts the call when the breaker opens while it is stalled. */
  controller: AbortController;
}

/** The reason a stalled call's signal is aborted with: the breaker opened while it waited. */
export class BreakerOpenedError extends Error {
  override readonly name = 'BreakerOpenedError';
}

interface KeyCalls {
  active: number;
  /** The most calls in flight since the last report. */
  peak: number;
  /** Latencies of recent successes (ms), a ring of LEARNED. */
  latencies: number[];
  next: number;
  /** When the newest-sent call that succeeded was sent (-Infinity: none yet). */
  answeredSentAt: number;
}

/** A key's thresholds at one sweep: a call's stall age, and the p95 of its learned latency (null: not learned). */
interface Thresholds {
  stallMs: number;
  p95Ms: number | null;
}

/**
 * Calls in flight per key, so a hanging or very slow endpoint is evidence while the calls still wait: a call
 * older than the stall threshold counts one transient failure, and one more for every further threshold it
 * waits. A timeout of 15 s cannot then hide a hang for 15 s, and a fleet that has few calls in flight still
 * produces samples. The threshold follows the endpoint's own healthy latency (the p95 of this process's recent
 * successes plus `deviations` mean deviations, floorMs at least; until this process has seen MIN_LEARNED,
 * initialMs or the fleet's figure, whichever is longer). A call already counted as stalled that then fails (it timed
 * out, or its connection was dropped as the server came back) is not counted again: the burst of failures a
 * long stall ends with says nothing new, and must not trip a breaker on a server that answers again. When
 * the breaker opens, stalled calls are aborted (abortStalled).
 */
export class InFlightCalls {
  private readonly calls = new Map<object, Call>();
  private readonly keys = new Map<string, KeyCalls>();
  private readonly deviations: number;
  private readonly floorMs: number;
  private readonly initialMs: number;

  constructor(options: StallOptions = {}) {
    this.deviations = options.deviations ?? STALL_DEVIATIONS;
    this.floorMs = options.floorMs ?? 1_000;
    this.initialMs = options.initialMs ?? 5_000;
  }

  /** A call under `decision` starts now; its signal aborts if the breaker opens while it is stalled. */
  start(decision: object, key: string, now: number): AbortSignal {
    const controller = new AbortController();
    this.calls.set(decision, { key, startedAt: now, stalls: 0, before: 0, controller });
    const k = this.entry(key);
    k.active++;
    k.peak = Math.max(k.peak, k.active);
    return controller.signal;
  }

  /** The call under `decision` is sent again now: its stall periods run from now, on top of those counted. */
  restart(decision: object, now: number): void {
    const call = this.calls.get(decision);
    if (!call) return;
    call.startedAt = now;
    call.before = call.stalls;
  }

  /** The call under `decision` ended (or was abandoned): how many stall failures it was counted for; null if unknown. */
  end(decision: object, success: { latencyMs: number } | null): number | null {
    const call = this.calls.get(decision);
    if (!call) return null;
    this.calls.delete(decision);
    const k = this.entry(call.key);
    k.active = Math.max(0, k.active - 1);
    if (success) {
      k.latencies[k.next] = success.latencyMs;
      k.next = (k.next + 1) % LEARNED;
      k.answeredSentAt = Math.max(k.answeredSentAt, call.startedAt);
    }
    return call.stalls;
  }

  /**
   * The age at which a call to `key` counts as stalled. `fleetMs`: the fleet's own threshold (the entity's
   * view): until this process has learned the key's latency, the threshold is at least that.
   */
  thresholdMs(key: string, fleetMs?: number): number {
    return this.thresholds(key, fleetMs).stallMs;
  }

  private thresholds(key: string, fleetMs?: number): Thresholds {
    const lat = this.keys.get(key)?.latencies ?? [];
    // The fleet's figure may only lengthen the wait: one host's fleet may fetch 50 ms cached tiles while this
    // process asks for 3 s metatiles, and its calls must not count as stalls before it has learned them.
    if (lat.length < MIN_LEARNED) return { stallMs: Math.max(this.floorMs, this.initialMs, fleetMs ?? 0), p95Ms: null };
    const sorted = [...lat].sort((a, b) => a - b);
    const p95 = sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)]!;
    const mean = lat.reduce((a, b) => a + b, 0) / lat.length;
    const deviation = lat.reduce((a, b) => a + Math.abs(b - mean), 0) / lat.length;
    const stallMs = Math.max(this.floorMs, stallAfterMs(p95, deviation, this.deviations));
    return { stallMs, p95Ms: Math.min(stallMs, Math.max(this.floorMs, p95)) };
  }

  /** New stall periods reached by `now`, per key: each is one transient failure to report. `fleetMs` as thresholdMs's. */
  sweep(now: number, fleetMs: (key: string) => number | undefined = () => undefined): Map<string, number> {
    const out = new Map<string, number>();
    const thresholds = new Map<string, Thresholds>();
    const unanswered = new Set<string>();
    const live: Call[] = [];
    for (const [decision, call] of this.calls) {
      const age = now - call.startedAt;
      if (age > FORGET_AFTER_MS) {
        this.end(decision, null);
        continue;
      }
      let t = thresholds.get(call.key);
      if (t === undefined) thresholds.set(call.key, (t = this.thresholds(call.key, fleetMs(call.key))));
      if (age >= t.stallMs && call.startedAt >= this.entry(call.key).answeredSentAt) unanswered.add(call.key);
      live.push(call);
    }
    for (const call of live) {
      const t = thresholds.get(call.key)!;
      const age = now - call.startedAt;
      let due = call.before + Math.floor(age / t.stallMs);
      // The key stopped answering (a call has stalled and none sent after it has answered): a call sent since
      // the last answered one is stalled once past the p95, the age by which healthy calls have answered; its
      // later periods run as before. The hang's calls are then judged over one p95, not over a render time
      // plus the threshold, while the answers of calls sent before the hang still land.
      if (
        due === call.before &&
        t.p95Ms !== null &&
        age >= t.p95Ms &&
        unanswered.has(call.key) &&
        call.startedAt >= this.entry(call.key).answeredSentAt
      )
        due++;
      if (due > call.stalls) {
        out.set(call.key, (out.get(call.key) ?? 0) + due - call.stalls);
        call.stalls = due;
      }
    }
    return out;
  }

  /** The guard closes: nothing is tracked any more (calls still in flight are not aborted: they are their callers'). */
  forgetAll(): void {
    this.calls.clear();
    this.keys.clear();
  }

  /** Calls to `key` counted as stalled are still in flight (the guard then reads the breaker's state more often). */
  stalled(key: string): boolean {
    for (const call of this.calls.values())
      if (call.key === key && call.stalls > 0 && !call.controller.signal.aborted) return true;
    return false;
  }

  /** Keys with calls counted as stalled still in flight. */
  stalledKeys(): Set<string> {
    const keys = new Set<string>();
    for (const call of this.calls.values()) if (call.stalls > 0) keys.add(call.key);
    return keys;
  }

  /**
   * The breaker opened: stalled calls to `key` are aborted (their callers apply the refusal's fallback), so a
   * hung server does not keep the fleet's connections and calls until each times out. Calls that are not
   * stalled go on: their answers are due and tell the breaker something. Returns how many were aborted.
   */
  abortStalled(key: string, reason: string): number {
    let n = 0;
    for (const call of this.calls.values()) {
      if (call.key !== key || call.stalls === 0 || call.controller.signal.aborted) continue;
      call.controller.abort(new BreakerOpenedError(reason));
      n++;
    }
    return n;
  }

  /** The most calls in flight to `key` since the last call of this (then reset to those in flight now). */
  takePeak(key: string): number {
    const k = this.keys.get(key);
    if (!k) return 0;
    const peak = k.peak;
    k.peak = k.active;
    return peak;
  }

  get size(): number {
    return this.calls.size;
  }

  private entry(key: string): KeyCalls {
    let k = this.keys.get(key);
    if (!k) {
      k = { active: 0, peak: 0, latencies: [], next: 0, answeredSentAt: -Infinity };
      this.keys.set(key, k);
    }
    return k;
  }
}
