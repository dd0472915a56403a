import { parsePolicyConfig, permitFor } from '../../breaker';
import { EntityLink } from './entity-link';
import { Pacer } from './pacer';
import { ProbeRequests } from './probe-requests';
import { ReportSender } from './report-sender';
import { resolveGuardOptions, type CallOutcome, type GuardDecision, type GuardOptions, type GuardStats, type ResolvedGuardOptions } from './types';
import { CLOSED_VIEW, ViewCache, type CachedView } from './view-cache';

/**
 * The worker side of a fleet-wide breaker. Decides each call from a per-process view of the entity (read by
 * query, at most `cacheTtlMs` old, one query in flight per key), reports outcomes in batches by
 * signal-with-start (failures at once), takes half-open probe tokens, and fails open when Temporal cannot
 * be reached: the coordination store must never halt the pipeline.
 */
export class BreakerGuard {
  readonly stats: GuardStats = { failOpen: 0, refused: 0, probesGranted: 0, viewReads: 0, reportsSent: 0, reportErrors: 0 };
  private readonly o: ResolvedGuardOptions;
  /** Each key's cached view, held for the view cache (test/entity/fail-open.test.ts resets one's fetchedAt). */
  private readonly keys = new Map<string, CachedView>();
  private readonly link: EntityLink;
  private readonly views: ViewCache;
  private readonly reports: ReportSender;
  private readonly probes: ProbeRequests;
  private readonly pacer: Pacer;
  private closed = false;

  constructor(options: GuardOptions) {
    // A bad configuration is the caller's error, now: not a failed entity run per report later.
    if (options.config) parsePolicyConfig(options.config);
    this.o = resolveGuardOptions(options);
    this.link = new EntityLink(this.o, this.stats);
    this.views = new ViewCache(this.keys, this.link, this.stats, this.o.cacheTtlMs, (key) => this.reports.alarm(key) !== null);
    this.reports = new ReportSender(this.o, this.link, this.views, this.stats);
    this.probes = new ProbeRequests(this.o, this.link, this.views, this.stats);
    this.pacer = new Pacer(this.o, this.link, this.views, this.reports);
  }

  /** Decides one call to the endpoint of `key` (a canonical breaker key). */
  async acquire(key: string): Promise<GuardDecision> {
    // This process has just seen failures: let the entity hear of them and read its verdict before calling
    // again, but never wait long on it (a busy server must not stall the pipeline).
    const alarm = this.reports.alarm(key);
    if (alarm) await Promise.race([alarm, new Promise((r) => setTimeout(r, 4 * this.o.failureFlushMs))]);
    let view = await this.views.get(key);
    if (view === undefined) return this.link.failOpen(key);
    // No entity yet (or it finished idle): closed until someone reports otherwise.
    let permit = permitFor(view ?? CLOSED_VIEW, Date.now());
    const rate = permit.allow ? await this.pacer.rateFor(key, view, permit.allowance) : null;
    if (rate !== null) {
      await this.pacer.pace(key, rate);
      // The wait for a slot can be long: decide again on the state as it is now (the breaker may have opened).
      view = await this.views.get(key);
      if (view === undefined) return this.link.failOpen(key);
      permit = permitFor(view ?? CLOSED_VIEW, Date.now());
    }
    if (permit.allow) return { kind: 'proceed', key, state: permit.state, allowance: permit.allowance, failOpen: false };
    if (!permit.probeRequired) {
      this.stats.refused++;
      return { kind: 'refused', key, state: permit.state, retryAfterMs: permit.retryAfterMs, reason: `breaker ${permit.state}` };
    }
    // Half-open with every token out: refuse here, without a signal (a fleet asking every second would load
    // the entity for nothing). The holder's result or the lease's end frees the slot; the next view shows it.
    if (view && view.probesOutstanding >= view.maxConcurrentProbes && view.state === 'half-open') {
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: another worker holds the probe token' };
    }
    // Half-open: one request for a token per process at a time; the others wait for its answer.
    if (this.probes.asking(key)) {
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: this process is already asking for the probe token' };
    }
    return this.probes.request(key);
  }

  /**
   * A call made under `decision` that ended without an answer from the endpoint (we aborted it: the activity
   * was cancelled). It says nothing about the endpoint's health: a probe token is handed back as a neutral
   * result (released, not counted); an ordinary call reports nothing.
   */
  abandon(decision: GuardDecision): void {
    if (decision.kind === 'probe') this.release(decision, { kind: 'neutral' });
  }

  /** Records the outcome of a call made under `decision`. */
  release(decision: GuardDecision, outcome: CallOutcome): void {
    if (decision.kind === 'refused') return;
    if (decision.kind === 'probe') this.probes.result(decision, outcome);
    else this.reports.add(decision.key, outcome);
  }

  /** Sends every buffered report now. */
  async flush(): Promise<void> {
    await this.reports.flush();
  }

  /** Flushes and stops the timers; waits for signals in flight. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.reports.stop();
    this.pacer.stop();
    await this.flush();
    await this.link.settled();
  }
}
