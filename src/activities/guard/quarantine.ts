import type { BreakerView, OutcomeKind } from '../../breaker';
import type { WorkerMetrics } from '../metrics/worker-metrics';
import { quarantineVerdict, type QuarantineState } from './decide';
import type { GuardDecision, QuarantineOptions } from './types';

/**
 * This worker's own quarantine, per endpoint: when its calls fail far more than the fleet's (its resolver, its
 * sockets, its proxy, its route), it stops calling the endpoint itself instead of feeding failures to a
 * breaker the rest of the fleet relies on. The entity's quorum already keeps one worker's failures from opening
 * the fleet's breaker; the quarantine spares the endpoint and the worker's tiles the doomed calls.
 *
 * Quarantined when its last `localRun` calls all failed locally (`local`: the endpoint was never reached), or
 * when the newest `samples` outcomes (at least `minSamples`) fail at `ratio` or more and either
 * - the worker's own local-origin failures (`local`: the endpoint was never reached) alone reach `ratio`, or
 * - the entity's view says the fleet is being served: at least 2 reporters active, the breaker closed, and the
 *   fleet's failure ratio at most `fleetRatioMax` and a quarter of this worker's, on every judgement for
 *   `confirmMs` (an outage's onset reaches this worker before the fleet's window: the breaker opens meanwhile).
 * A view without the fleet's figures (an entity from before them) allows only the first.
 *
 * While quarantined the worker's calls are refused (the fallback applies, as for an open breaker) except one
 * call every `probeIntervalMs`, which goes through as usual: a success lifts the quarantine.
 */

/** Outcomes the quarantine reads: s(uccess), f(ailure at the endpoint), l(ocal failure). */
type Mark = 's' | 'f' | 'l';

interface KeyQuarantine {
  marks: Mark[];
  /** Set while quarantined. */
  since: number | null;
  reason: string;
  /** Since when endpoint failures against a served fleet have been judged, unbroken (null: not now). */
  suspectSince: number | null;
  nextProbeAt: number;
  /** The call let through as the quarantine's probe, while it is in flight. */
  probe: GuardDecision | null;
}

export class Quarantine {
  private readonly keys = new Map<string, KeyQuarantine>();
  private readonly o: Required<QuarantineOptions>;

  constructor(
    options: QuarantineOptions | undefined,
    private readonly metrics: WorkerMetrics,
    private readonly logger: { warn(message: string, meta?: Record<string, unknown>): void },
  ) {
    this.o = {
      samples: 20,
      minSamples: 8,
      localRun: 5,
      ratio: 0.8,
      fleetRatioMax: 0.2,
      probeIntervalMs: 2_000,
      confirmMs: 3_000,
      ...options,
    };
  }

  /** Whether `key` is quarantined in this process now. */
  quarantined(key: string): boolean {
    return this.keys.get(key)?.since != null;
  }

  /** Endpoints quarantined in this process, with when and why. */
  list(): { key: string; since: number; reason: string }[] {
    return [...this.keys].flatMap(([key, k]) => (k.since === null ? [] : [{ key, since: k.since, reason: k.reason }]));
  }

  /** `key`'s quarantine as the decision reads it (decide.ts), or null when not quarantined. */
  state(key: string): QuarantineState | null {
    const k = this.keys.get(key);
    return !k || k.since === null ? null : { reason: k.reason, nextProbeAt: k.nextProbeAt, probing: k.probe !== null };
  }

  /**
   * A decision the breaker let through: refused while quarantined, except one probe call per probeIntervalMs
   * (decide.ts's rule). Decisions that are not `proceed` (the fleet's probe, a refusal) pass untouched.
   */
  admit(decision: GuardDecision, now: number): GuardDecision {
    if (decision.kind !== 'proceed') return decision;
    const verdict = quarantineVerdict(this.state(decision.key), now);
    if (verdict.kind === 'probe') this.probing(decision, now);
    if (verdict.kind !== 'refuse') return decision;
    return {
      kind: 'refused',
      key: decision.key,
      state: decision.state,
      retryAfterMs: verdict.retryAfterMs,
      reason: verdict.reason,
    };
  }

  /** `decision` goes through as the quarantine's probe call: the next one goes after the interval. */
  probing(decision: GuardDecision, now: number): void {
    const k = this.keys.get(decision.key);
    if (!k || k.since === null) return;
    k.probe = decision;
    k.nextProbeAt = now + this.o.probeIntervalMs;
  }

  /**
   * The outcome of a call made under `decision` (null: abandoned, no answer). `view`: the entity's view as this
   * process last read it, for the fleet's failure ratio.
   */
  outcome(decision: GuardDecision, kind: OutcomeKind | null, view: BreakerView | null | undefined, now: number): void {
    if (decision.kind === 'refused') return;
    const k = this.entry(decision.key);
    if (k.probe === decision) {
      k.probe = null;
      if (kind === 'success') this.lift(decision.key, k, now);
      return;
    }
    const mark: Mark | null =
      kind === 'success'
        ? 's'
        : kind === 'local'
          ? 'l'
          : kind === 'transient' || kind === 'service-exception'
            ? 'f'
            : null;
    if (mark === null || k.since !== null) return;
    k.marks.push(mark);
    if (k.marks.length > this.o.samples) k.marks.shift();
    const verdict = this.judge(k.marks, view);
    if (verdict && !verdict.local) {
      // Against the fleet's figures: only once they have held on every judgement for confirmMs (a judgement
      // that finds the breaker not closed, or the fleet failing too, starts it over; slow calls do not).
      k.suspectSince ??= now;
      if (now - k.suspectSince < this.o.confirmMs) return;
    } else k.suspectSince = null;
    if (verdict) this.enter(decision.key, k, verdict.reason, now);
  }

  /** An abandoned probe call frees the slot (the next one goes after the interval). */
  abandoned(decision: GuardDecision): void {
    if (decision.kind === 'refused') return;
    const k = this.keys.get(decision.key);
    if (k?.probe === decision) k.probe = null;
  }

  /** Why `marks` quarantine this worker: its own local failures, or endpoint failures against a served fleet. */
  private judge(
    marks: readonly Mark[],
    view: BreakerView | null | undefined,
  ): { reason: string; local: boolean } | null {
    const n = marks.length;
    // Local failures are the worker's own by definition: a short unbroken run of them is enough.
    const run = marks.slice(-this.o.localRun);
    if (run.length === this.o.localRun && run.every((m) => m === 'l'))
      return {
        local: true,
        reason: `this worker's last ${run.length} calls failed locally (its resolver, sockets or proxy), never reaching the endpoint`,
      };
    if (n < this.o.minSamples) return null;
    const local = marks.filter((m) => m === 'l').length;
    const failed = local + marks.filter((m) => m === 'f').length;
    const own = failed / n;
    if (own < this.o.ratio) return null;
    if (local / n >= this.o.ratio)
      return {
        local: true,
        reason: `${local} of this worker's last ${n} calls failed locally (its resolver, sockets or proxy), never reaching the endpoint`,
      };
    const fleet = view?.fleet;
    if (
      !fleet ||
      view.state !== 'closed' ||
      fleet.reporters < 2 ||
      fleet.failureRatio > Math.min(this.o.fleetRatioMax, own / 4)
    )
      return null;
    return {
      local: false,
      reason: `${failed} of this worker's last ${n} calls failed while the fleet's ${fleet.reporters} reporters see ${Math.round(fleet.failureRatio * 100)}% failing`,
    };
  }

  private enter(key: string, k: KeyQuarantine, reason: string, now: number): void {
    k.since = now;
    k.reason = reason;
    k.nextProbeAt = now + this.o.probeIntervalMs;
    k.probe = null;
    this.metrics.quarantine(key, true);
    this.logger.warn('quarantined: refusing this worker its own calls to the endpoint', {
      key,
      reason,
      probeIntervalMs: this.o.probeIntervalMs,
    });
  }

  private lift(key: string, k: KeyQuarantine, now: number): void {
    if (k.since === null) return;
    this.logger.warn('quarantine lifted: a probe call succeeded', { key, quarantinedMs: now - k.since });
    k.since = null;
    k.suspectSince = null;
    k.marks = [];
    this.metrics.quarantine(key, false);
  }

  private entry(key: string): KeyQuarantine {
    let k = this.keys.get(key);
    if (!k)
      this.keys.set(key, (k = { marks: [], since: null, reason: '', suspectSince: null, nextProbeAt: 0, probe: null }));
    return k;
  }
}
