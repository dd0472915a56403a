import { maxCooldownMs, parsePolicyConfig, permitFor, type BreakerView } from '../../breaker';
import { isFailure } from '../../breaker';
import { BreakerStateGauge } from '../metrics/state-gauge';
import { EntityLink } from './entity-link';
import { InFlightCalls } from './in-flight';
import { LearnedProbes } from './learned-probes';
import type { ProbeSpec } from '../../messages/breaker';
import { probeSpecSchema } from '../../messages/breaker-validation';
import { Pacer } from './pacer';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pauses } from './pauses';
import { ProbeRequests } from './probe-requests';
import { ProbeSpread } from './probe-spread';
import { Quarantine } from './quarantine';
import { ReadBudget } from './read-budget';
import { ReportSender } from './report-sender';
import { FleetSizes, ReportSchedule } from './report-spacing';
import { resolveGuardOptions, type CallOutcome, type GuardDecision, type GuardOptions, type GuardStats, type ResolvedGuardOptions } from './types';
import { CLOSED_VIEW, ViewCache, type CachedView } from './view-cache';
import { WedgeWatch } from './wedge-watch';

/**
 * The worker side of a fleet-wide breaker. Decides each call from a per-process view of the entity (read by
 * query, at most `cacheTtlMs` old, one query in flight per key), reports outcomes in batches by
 * signal-with-start (failures at once), takes half-open probe tokens, and fails open when Temporal cannot
 * be reached: the coordination store must never halt the pipeline.
 */
export class BreakerGuard {
  readonly stats: GuardStats = {
    failOpen: 0,
    refused: 0,
    probesGranted: 0,
    viewReads: 0,
    reportsSent: 0,
    reportErrors: 0,
    stalled: 0,
    shed: 0,
    paced: 0,
    waitedUnreachable: 0,
    wedgedFailOpen: 0,
    blindFailOpen: 0,
    wedged: 0,
  };
  private readonly o: ResolvedGuardOptions;
  /** Each key's cached view, held for the view cache (test/entity/fail-open.test.ts resets one's fetchedAt). */
  private readonly keys = new Map<string, CachedView>();
  private readonly link: EntityLink;
  private readonly views: ViewCache;
  private readonly reports: ReportSender;
  private readonly probes: ProbeRequests;
  private readonly spread: ProbeSpread;
  private readonly pacer: Pacer;
  private readonly pauses: Pauses;
  private readonly calls: InFlightCalls;
  private readonly shedding = new Set<string>();
  private readonly learned = new LearnedProbes();
  private readonly badProbes = new Set<string>();
  private readonly sweeper: NodeJS.Timeout | null;
  private readonly stateGauge: BreakerStateGauge;
  private readonly wedges: WedgeWatch;
  /** Keys whose last decision found the entity wedged: a fail-open for them says so. */
  private readonly wedgedNow = new Set<string>();
  /** This process's own quarantine per endpoint, when its calls fail far more than the fleet's (quarantine.ts). */
  readonly quarantine: Quarantine;
  /** Each key's fleet as its entity publishes it: how far apart this process's reports go. */
  private readonly fleet = new FleetSizes();
  private closed = false;

  constructor(options: GuardOptions) {
    // A bad configuration is the caller's error, now: not a failed entity run per report later.
    const config = parsePolicyConfig(options.config ?? {});
    this.o = resolveGuardOptions(options);
    // This process's own pause after a 429 is capped as the entity caps the fleet's (by this guard's policy).
    this.pauses = new Pauses(maxCooldownMs(config));
    this.link = new EntityLink(this.o, this.stats);
    this.stateGauge = new BreakerStateGauge(this.o.metrics, (key) => this.views.get(key));
    this.views = new ViewCache(
      this.keys,
      this.link,
      this.stats,
      this.o.cacheTtlMs,
      (key) => this.reports.alarm(key) !== null || this.reports.failing(key) || this.calls.stalled(key),
      (key, view) => {
        this.fleet.saw(key, view, Date.now());
        this.stateGauge.shown(key, view);
      },
      new ReadBudget(this.o.maxReadsPerSecond),
    );
    this.wedges = new WedgeWatch(this.o.wedgeGraceMs, {
      wedged: (key, evidence) => {
        this.stats.wedged++;
        this.o.metrics.entityWedged(key);
        this.o.logger.warn('breaker entity wedged (its workflow tasks are not done); failing open until it moves again', { key, ...evidence });
      },
      moving: (key, wedgedForMs) => this.o.logger.warn('breaker entity moving again; no longer failing open for it', { key, wedgedForMs }),
    });
    this.calls = new InFlightCalls(this.o.stall || {});
    this.reports = new ReportSender(
      this.o,
      this.link,
      this.views,
      this.stats,
      (key) => this.calls.takePeak(key),
      (key) => this.probeFor(key),
      new ReportSchedule(this.o, this.fleet),
    );
    // Stalled calls are looked at four times a second: a hang is evidence within a quarter second of the threshold.
    this.sweeper = this.o.stall === false ? null : setInterval(() => this.sweepStalls(), 250);
    this.sweeper?.unref();
    this.probes = new ProbeRequests(this.o, this.link, this.views, this.stats);
    this.spread = new ProbeSpread(this.o.probeSpreadMs, this.o.probeJitter);
    this.pacer = new Pacer(this.o, this.link, this.views, this.reports);
    this.quarantine = new Quarantine(this.o.quarantine, this.o.metrics, this.o.logger);
  }

  /**
   * Decides one call to the endpoint of `key` (a canonical breaker key). A `proceed` decision is a call in
   * flight from now until it is released or abandoned: release or abandon every one.
   */
  async acquire(key: string): Promise<GuardDecision> {
    this.stateGauge.used(key);
    const decided = await this.decide(key);
    // What the breaker lets through, this process's own quarantine may still refuse.
    const admitted = this.quarantine.admit(decided, Date.now());
    if (admitted !== decided) this.stats.refused++;
    const decision = this.link.losses.mark(admitted);
    if (decision.kind === 'refused') this.o.metrics.notPermitted(key, decision.state);
    else if (decision.kind === 'proceed' && decision.failOpen) this.o.metrics.failOpen(key, decision.failOpenReason);
    if (decision.kind === 'proceed') decision.signal = this.calls.start(decision, key, Date.now());
    return decision;
  }

  /**
   * A URL this process fetched from `key`'s endpoint with success, from a source with no credentials or extra
   * headers: the entity's self-probe, unless the options name one (learned-probes.ts says what is kept).
   */
  learnProbe(key: string, url: string, userAgent?: string): void {
    if (this.o.probe === undefined && this.o.learnProbes !== false) this.learned.learn(key, url, userAgent);
  }

  /**
   * The self-probe spec this process gives `key`'s entity: the options', else one learned from its fetches. One
   * the entity would refuse (a report carrying it would be refused whole) is left out, and said once.
   */
  private probeFor(key: string): ProbeSpec | undefined {
    const probe = (typeof this.o.probe === 'function' ? this.o.probe(key) : this.o.probe) ?? this.learned.spec(key);
    if (!probe) return undefined;
    const checked = probeSpecSchema.safeParse(probe);
    if (checked.success) return probe;
    if (!this.badProbes.has(key)) {
      this.badProbes.add(key);
      this.o.logger.warn('self-probe spec left out: the entity would refuse it', { key, issues: checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') });
    }
    return undefined;
  }

  /** The breaker's view as this process sees it (cached): null when no entity exists, undefined when unreachable. */
  view(key: string): Promise<BreakerView | null | undefined> {
    return this.views.get(key);
  }

  private async decide(key: string): Promise<GuardDecision> {
    // This process has just seen failures: let the entity hear of them and read its verdict before calling
    // again, but never wait long on it (a busy server must not stall the pipeline).
    const alarm = this.reports.alarm(key);
    if (alarm) await Promise.race([alarm, new Promise((r) => setTimeout(r, 4 * this.o.failureFlushMs))]);
    let view = await this.readView(key);
    // A 429 asked to wait (this process's own, or the fleet's from the entity): a call that may go waits it out
    // first; the breaker stays closed. Failing open keeps the last pause known, as it keeps the pace.
    if (view === undefined || permitFor(view ?? CLOSED_VIEW, Date.now()).allow) {
      const pause = await this.waitOutPause(key, view);
      if (pause.refused) return pause.refused;
      if (pause.waited) view = await this.readView(key);
    }
    if (view === undefined) return this.failOpen(key);
    // No entity yet (or it finished idle): closed until someone reports otherwise.
    let permit = permitFor(view ?? CLOSED_VIEW, Date.now());
    const rate = permit.allow ? await this.pacer.rateFor(key, view, permit.allowance) : null;
    if (rate !== null) {
      await this.pacer.pace(key, rate);
      // The wait for a slot can be long: decide again on the state as it is now (the breaker may have opened).
      view = await this.readView(key);
      if (view === undefined) return this.link.failOpen(key, this.failOpenReason(key));
      permit = permitFor(view ?? CLOSED_VIEW, Date.now());
    }
    if (permit.allow || !permit.probeRequired) this.spread.clear(key);
    if (permit.allow) return { kind: 'proceed', key, state: permit.state, allowance: permit.allowance, failOpen: false };
    if (!permit.probeRequired) {
      this.stats.refused++;
      return { kind: 'refused', key, state: permit.state, retryAfterMs: permit.retryAfterMs, reason: `breaker ${permit.state}` };
    }
    // Half-open with every token out: refuse here, without a signal (a fleet asking every second would load
    // the entity for nothing). The holder's result or the lease's end frees the slot; the next view shows it.
    if (view && view.probesOutstanding >= view.maxConcurrentProbes && view.state === 'half-open') {
      this.spread.clear(key);
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: another worker holds the probe token' };
    }
    // The whole fleet sees the half-open at the same instant: wait this process's share of the spread, then
    // decide on the state as it is by then (another process's token may be out).
    const wait = this.spread.waitMs(key, view, Date.now());
    if (wait > 0) {
      await sleep(wait);
      this.views.invalidate(key);
      return this.decide(key);
    }
    // Half-open: one request for a token per process at a time; the others wait for its answer.
    if (this.probes.asking(key)) {
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: this process is already asking for the probe token' };
    }
    return this.probes.request(key).finally(() => this.spread.clear(key));
  }

  /**
   * Waits while a 429's pause holds for `key`, re-reading the entity's view after each wait (another 429 may
   * have extended it). A pause with more than maxPaceWaitMs left is refused instead, with its end.
   */
  private async waitOutPause(key: string, view: BreakerView | null | undefined): Promise<{ waited: boolean; refused?: GuardDecision }> {
    let waited = false;
    for (;;) {
      const seen = view === undefined ? this.views.last(key) : view;
      const left = this.pauses.leftMs(key, seen, Date.now());
      if (left <= 0) return { waited };
      if (left > this.o.maxPaceWaitMs) {
        this.stats.refused++;
        const until = new Date(Date.now() + left).toISOString();
        return { waited, refused: { kind: 'refused', key, state: seen?.state ?? 'closed', retryAfterMs: left, reason: `paced: the endpoint answered 429 and asked to wait until ${until}` } };
      }
      if (!waited) this.stats.paced++;
      waited = true;
      await sleep(left);
      view = await this.views.get(key);
    }
  }

  /**
   * The entity cannot be reached: proceed, but at the pace last known for this process (the rate's share), so
   * an outage of Temporal does not lift an endpoint's rate limit.
   */
  private async failOpen(key: string): Promise<GuardDecision> {
    const rate = this.pacer.failOpenRate(key, this.views.last(key));
    if (rate !== null) await this.pacer.pace(key, rate);
    return this.link.failOpen(key, this.failOpenReason(key));
  }

  /**
   * The entity's view for deciding: undefined (fail open) when it cannot be read, and when it is wedged: a
   * view whose timers are overdue or whose workflow tasks are not done (wedge-watch.ts) hears no report and
   * moves no state, so deciding on it would refuse (or wait for a probe) with nothing to end it.
   */
  private async readView(key: string): Promise<BreakerView | null | undefined> {
    const view = await this.views.get(key);
    if (view !== undefined && this.wedges.wedged(key, view, this.views.task(key), Date.now())) {
      this.wedgedNow.add(key);
      return undefined;
    }
    this.wedgedNow.delete(key);
    return view;
  }

  private failOpenReason(key: string): 'wedged' | 'unreachable' {
    return this.wedgedNow.has(key) ? 'wedged' : 'unreachable';
  }

  /**
   * A call made under `decision` that ended without an answer from the endpoint (we aborted it: the activity
   * was cancelled). It says nothing about the endpoint's health: a probe token is handed back as a neutral
   * result (released, not counted); an ordinary call reports nothing.
   */
  abandon(decision: GuardDecision): void {
    this.quarantine.abandoned(decision);
    if (decision.kind === 'probe') this.release(decision, { kind: 'neutral' });
    else if (decision.kind === 'proceed') this.calls.end(decision, null);
  }

  /** Records the outcome of a call made under `decision`. */
  release(decision: GuardDecision, outcome: CallOutcome): void {
    if (decision.kind === 'refused') return;
    this.quarantine.outcome(decision, outcome.kind, this.views.last(decision.key), Date.now());
    // The worker's own failure (its resolver, sockets, proxy) says nothing of the endpoint: a probe token goes
    // back as neutral (released, not counted), an ordinary call is not reported.
    if (outcome.kind === 'local') outcome = { ...outcome, kind: 'neutral' };
    // This process stops at once; the report carries the wait to the entity, which pauses the fleet.
    if (outcome.kind === 'rate-limited' && outcome.retryAfterMs) this.pauses.rateLimited(decision.key, outcome.retryAfterMs, Date.now());
    if (decision.kind === 'probe') {
      this.probes.result(decision, outcome);
      return;
    }
    const success = outcome.kind === 'success' ? { latencyMs: outcome.latencyMs ?? 0 } : null;
    const stalls = this.calls.end(decision, success);
    // Counted while it stalled: its end as a failure (a timeout, a dropped connection) says nothing new.
    if (stalls && isFailure(outcome.kind)) return;
    this.reports.add(decision.key, outcome);
  }

  /** Calls to `key` in flight longer than this count as failures while they wait. */
  stallThresholdMs(key: string): number {
    return this.calls.thresholdMs(key);
  }

  private sweepStalls(): void {
    if (this.closed) return;
    for (const [key, stalls] of this.calls.sweep(Date.now())) {
      this.stats.stalled += stalls;
      this.reports.add(key, { stalls });
    }
    // Tracked, so close() waits for a state read in flight instead of leaving it to a closed connection.
    for (const key of this.calls.stalledKeys()) this.link.track(this.shedIfOpen(key));
  }

  /** Stalled calls wait on nobody's behalf once the breaker is open: abort them (read the state, then act). */
  private async shedIfOpen(key: string): Promise<void> {
    if (this.shedding.has(key)) return;
    this.shedding.add(key);
    try {
      const view = await this.readView(key);
      if (!view || this.closed) return;
      const p = permitFor(view, Date.now());
      if (!p.allow) this.stats.shed += this.calls.abortStalled(key, `breaker ${p.state}: the call stalled and was abandoned`);
    } catch {
      // The state could not be read: the calls go on until they end or time out, as when failing open.
    } finally {
      this.shedding.delete(key);
    }
  }

  /** Sends every buffered report now. */
  async flush(): Promise<void> {
    await this.reports.flush();
  }

  /**
   * Flushes and stops the timers, then waits for every call to Temporal in flight (reads, reports, the client's
   * retries of them) and refuses new ones: each ends within the RPC deadline plus one retry delay, and a report
   * that cannot be delivered by then is dropped and counted. Close the client's connection only after this.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.reports.stop();
    this.pacer.stop();
    if (this.sweeper) clearInterval(this.sweeper);
    this.stateGauge.stop();
    this.calls.forgetAll();
    await this.flush();
    await this.link.close();
  }
}
