import { maxCooldownMs, parsePolicyConfig, type BreakerView } from '../../breaker';
import { pauseLeftMs } from './decide';
import { DecisionLoop, watchWedges } from './decision-loop';
import { isFailure } from '../../breaker';
import { BreakerStateGauge } from '../metrics/state-gauge';
import { EntityLink } from './entity-link';
import { InFlightCalls } from './in-flight';
import type { ProbeSource } from '../../messages/breaker';
import { Pacer } from './pacer';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pauses } from './pauses';
import { ProbeRequests } from './probe-requests';
import { ProbeSpread } from './probe-spread';
import { Quarantine } from './quarantine';
import { ReadBudget } from './read-budget';
import { ReportSender } from './report-sender';
import { FleetSizes, ReportSchedule } from './report-spacing';
import {
  resolveGuardOptions,
  type CallOutcome,
  type GuardDecision,
  type GuardOptions,
  type GuardStats,
  type ResolvedGuardOptions,
} from './types';
import { ViewCache, type CachedView } from './view-cache';
import { runChain, type ChainOptions, type ChainResult, type Provider } from './chain';
import { runOnce, type RunCall, type RunHost, type RunOptions } from './run';
import { RunSlots } from './run-slots';
import { SelfProbes } from './self-probes';
import { StallSweep } from './stall-sweep';

/**
 * The worker side of a fleet-wide breaker. Decides each call (decide.ts, a pure function; decision-loop.ts
 * performs its steps) from a per-process view of the entity (read by query, at most `cacheTtlMs` old, one
 * query in flight per key), reports outcomes in batches by
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
  /** Per key, this process's calls that failed in a row, none succeeding since (the hold after failures). */
  private readonly failStreaks = new Map<string, number>();
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
  /** Counts stalled calls and sheds them once the breaker opens (stall-sweep.ts); null: stall detection off. */
  private readonly stalls: StallSweep | null;
  private readonly stateGauge: BreakerStateGauge;
  /** The self-probe spec given to each key's entity (self-probes.ts). */
  private readonly selfProbes: SelfProbes;
  /** Performs decide.ts's steps for each call (decision-loop.ts). */
  private readonly loop: DecisionLoop;
  /** This process's own quarantine per endpoint, when its calls fail far more than the fleet's (quarantine.ts). */
  readonly quarantine: Quarantine;
  /** Each key's fleet as its entity publishes it: how far apart this process's reports go. */
  private readonly fleet = new FleetSizes();
  /** `run`'s calls in flight per key, held to the ramp. */
  private readonly runHost: RunHost & { fallback(name: string, key: string): void };
  private closed = false;

  constructor(options: GuardOptions) {
    // A bad configuration is the caller's error, now: not a failed entity run per report later.
    const config = parsePolicyConfig(options.config ?? {});
    this.o = resolveGuardOptions(options);
    this.selfProbes = new SelfProbes(this.o);
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
    const wedges = watchWedges(this.o, this.stats);
    this.calls = new InFlightCalls(this.o.stall || {});
    this.reports = new ReportSender(
      this.o,
      this.link,
      this.views,
      this.stats,
      (key) => this.calls.takePeak(key),
      (key) => this.selfProbes.specFor(key),
      new ReportSchedule(this.o, this.fleet),
    );
    this.stalls =
      this.o.stall === false
        ? null
        : new StallSweep({
            calls: this.calls,
            stats: this.stats,
            reports: this.reports,
            link: this.link,
            readView: (key) => this.loop.readView(key),
            fleetStallMs: (key) => this.fleetStallMs(key),
          });
    this.probes = new ProbeRequests(this.o, this.link, this.views, this.stats);
    this.spread = new ProbeSpread(this.o.probeSpreadMs, this.o.probeJitter);
    this.pacer = new Pacer(this.o, this.link, this.views, this.reports);
    this.quarantine = new Quarantine(this.o.quarantine, this.o.metrics, this.o.logger);
    this.loop = new DecisionLoop({
      o: this.o,
      stats: this.stats,
      link: this.link,
      views: this.views,
      reports: this.reports,
      probes: this.probes,
      spread: this.spread,
      pacer: this.pacer,
      pauses: this.pauses,
      quarantine: this.quarantine,
      wedges,
      failStreaks: this.failStreaks,
    });
    this.runHost = {
      acquire: (key) => this.acquire(key),
      release: (decision, outcome) => this.release(decision, outcome),
      abandon: (decision) => this.abandon(decision),
      slots: new RunSlots(),
      request: (name, key, kind, seconds) => this.o.metrics.request(name, key, kind, seconds),
      breach: (key, why) => {
        this.stats.contractBreaches = (this.stats.contractBreaches ?? 0) + 1;
        this.o.metrics.contractBreach(key);
        this.o.logger.warn('an answer broke its contract and was refused', { key, why });
      },
      fallback: (name, key) => this.o.metrics.fallback(name, key, 'mirror', 1),
    };
  }

  /**
   * Runs `fn` as one call to `key`'s endpoint under the fleet's breaker (run.ts): decided, reported and released
   * whatever `fn` does. Returns `fn`'s result; throws BreakerRefusedError when the breaker refuses,
   * ContractBreachError when the result breaks `options.contract`, and `fn`'s own error when it throws.
   */
  async run<T>(key: string, fn: (call: RunCall) => Promise<T>, options: RunOptions<T> = {}): Promise<T> {
    return (await runOnce(this.runHost, key, fn, options)).value;
  }

  /**
   * The first provider, each behind its own breaker, whose call goes through and whose answer holds (chain.ts);
   * throws ChainExhaustedError, naming each provider's reason, when none does.
   */
  runChain<T>(providers: readonly Provider<T>[], options: ChainOptions<T> = {}): Promise<ChainResult<T>> {
    return runChain(this.runHost, providers, options);
  }

  /**
   * Decides one call to the endpoint of `key` (a canonical breaker key). A `proceed` decision is a call in
   * flight from now until it is released or abandoned: release or abandon every one.
   */
  async acquire(key: string): Promise<GuardDecision> {
    this.stateGauge.used(key);
    const decision = await this.loop.decide(key);
    if (decision.kind === 'refused') this.o.metrics.notPermitted(key, decision.state);
    else if (decision.kind === 'proceed' && decision.failOpen) this.o.metrics.failOpen(key, decision.failOpenReason);
    if (decision.kind === 'proceed') decision.signal = this.calls.start(decision, key, Date.now());
    return decision;
  }

  /**
   * A URL this process fetched from `key`'s endpoint with success: the entity's self-probe, unless the options
   * name one (learned-probes.ts says what is kept). `source`: the sources file and source whose credentials or
   * headers it was sent with, which the probe reads again on the worker.
   */
  learnProbe(key: string, url: string, userAgent?: string, source?: ProbeSource): void {
    this.selfProbes.learn(key, url, userAgent, source);
  }

  /** The breaker's view as this process sees it (cached): null when no entity exists, undefined when unreachable. */
  view(key: string): Promise<BreakerView | null | undefined> {
    return this.views.get(key);
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

  /**
   * The call under `decision` is sent again at once (a connection dropped as a hang ended: dropped-call.ts):
   * its time in flight starts over, so the first attempt's wait is not counted as a stall of the second.
   */
  restarted(decision: GuardDecision): void {
    if (decision.kind === 'proceed') this.calls.restart(decision, Date.now());
  }

  /** Records the outcome of a call made under `decision`. */
  release(decision: GuardDecision, outcome: CallOutcome): void {
    if (decision.kind === 'refused') return;
    this.quarantine.outcome(decision, outcome.kind, this.views.last(decision.key), Date.now());
    // The worker's own failure (its resolver, sockets, proxy) says nothing of the endpoint: a probe token goes
    // back as neutral (released, not counted), an ordinary call is not reported.
    if (outcome.kind === 'local') outcome = { ...outcome, kind: 'neutral' };
    // This process stops at once; the report carries the wait to the entity, which pauses the fleet. A failure's
    // Retry-After (a 503 asking to wait) holds this process as a 429's does.
    if ((outcome.kind === 'rate-limited' || isFailure(outcome.kind)) && outcome.retryAfterMs)
      this.pauses.rateLimited(decision.key, outcome.retryAfterMs, Date.now());
    if (decision.kind === 'probe') {
      this.probes.result(decision, outcome);
      return;
    }
    const success = outcome.kind === 'success' ? { latencyMs: outcome.latencyMs ?? 0 } : null;
    if (success) this.failStreaks.delete(decision.key);
    else if (isFailure(outcome.kind)) this.failStreaks.set(decision.key, (this.failStreaks.get(decision.key) ?? 0) + 1);
    const stalls = this.calls.end(decision, success);
    // Counted while it stalled: its end as a failure (a timeout, a dropped connection) says nothing new.
    if (stalls && isFailure(outcome.kind)) return;
    this.reports.add(decision.key, outcome);
  }

  /**
   * Waits out the pause the endpoint asked for (this process's own, or the fleet's as last read), before a call
   * takes a connection; one longer than maxPaceWaitMs is the decision's to refuse at once. Then the decision
   * that follows reads the entity afresh: the breaker may have opened meanwhile, and a view cached from before
   * the wait must not send a request after the open.
   */
  async waitOutPause(key: string, signal?: AbortSignal): Promise<void> {
    const now = Date.now();
    const left = pauseLeftMs(this.pauses.until(key, now), this.views.last(key) ?? null, now);
    if (left <= 0 || left > this.o.maxPaceWaitMs) return;
    this.stats.paced++;
    await sleep(left, undefined, signal ? { signal } : undefined).catch(() => undefined);
    this.views.invalidate(key);
  }

  /** Calls to `key` in flight longer than this count as failures while they wait. */
  stallThresholdMs(key: string): number {
    return this.calls.thresholdMs(key, this.fleetStallMs(key));
  }

  /** The fleet's stall threshold for `key` in the last view read, if it gave one. */
  private fleetStallMs(key: string): number | undefined {
    return this.views.last(key)?.fleet?.stallMs;
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
    this.stalls?.stop();
    this.stateGauge.stop();
    this.calls.forgetAll();
    await this.flush();
    await this.link.close();
  }
}
