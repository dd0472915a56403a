import { breakerWorkflowId, isFailure } from '../../breaker';
import {
  BREAKER_ENTITY_WORKFLOW,
  reportSignal,
  type BreakerEntityWorkflow,
  type OutcomeReport,
  type ProbeSpec,
} from '../../messages/breaker';
import { isNotFound, type EntityLink } from './entity-link';
import { ReportBuffer } from './report-buffer';
import { countedForMs, FailureFlushes, FleetSizes, ReportSchedule } from './report-spacing';
import type { CallOutcome, GuardStats, ResolvedGuardOptions } from './types';
import type { ViewCache } from './view-cache';

interface KeyReports {
  buffer: ReportBuffer;
  /** A failure report on its way (gathering, then sending): calls wait for it and then re-read the state. */
  alarm: Promise<void> | null;
  alarmEndedAt: number;
  /** The entity is known to be running (a signal-with-start succeeded): reports go as plain signals. */
  started: boolean;
  /** When this process last reported to the entity (it counts among the rate's sharers for a while after). */
  reportedAt: number;
  /** A 429's wait on its way to the entity (sent after the short gathering delay, not at the interval). */
  pacing: boolean;
  /** The self-probe URL a report has carried to the entity (each spec goes once, not with every report). */
  probeSent: string | null;
  /** When the oldest failure not yet sent was buffered (null: none waits). */
  failuresHeldSince: number | null;
}

/**
 * The longest a failure waits for this process's turn among the flushers (ms). The draw counts the largest
 * fleet seen lately: a few workers left of a large fleet (a scale-down, a job's tail, an outage of a few)
 * would otherwise wait tens of seconds to be drawn.
 */
export const MAX_FAILURE_HOLD_MS = 3_000;

/**
 * Outcomes reported to each key's entity: batched and sent once per report interval (longer in a large fleet:
 * report-spacing.ts), except that failures go after a short gathering delay when this process's recent
 * outcomes turn bad and it is among the fleet's flushers of the moment (all of a small fleet, about
 * failureFlushers workers a second of a large one: report-spacing.ts's FailureFlushes). Sent by
 * signal-with-start (the first report creates the entity), then by plain signal while the entity is known to run.
 */
export class ReportSender {
  private readonly keys = new Map<string, KeyReports>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly interval: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly o: ResolvedGuardOptions,
    private readonly link: EntityLink,
    private readonly views: ViewCache,
    private readonly stats: GuardStats,
    /** The most calls this process had in flight to a key since its last report. */
    private readonly inFlight: (key: string) => number,
    /** The self-probe this process gives a key's entity, if any. */
    private readonly probeFor: (key: string) => ProbeSpec | undefined = () => undefined,
    /** When each key's report is due: every reportIntervalMs, or less often in a large fleet (report-spacing.ts). */
    private readonly schedule: ReportSchedule = new ReportSchedule(o, new FleetSizes()),
    /** Whether this process's failures go at once or wait for its next report (report-spacing.ts). */
    private readonly flushes: FailureFlushes = new FailureFlushes(o.failureFlushers),
  ) {
    // The timer ticks at the shortest interval; each key goes when its own spacing says it is due.
    this.interval = setInterval(() => void this.flushDue(), this.o.reportIntervalMs);
    this.interval.unref();
  }

  /** Buffers an ordinary call's outcome, or `stalls` failures of calls still in flight past the stall threshold. */
  add(key: string, outcome: CallOutcome | { stalls: number }): void {
    const kr = this.entry(key);
    if ('stalls' in outcome) kr.buffer.addStalls(outcome.stalls);
    else kr.buffer.add(outcome.kind, outcome.latencyMs, outcome.retryAfterMs);
    // A 429 (or a failure) asked to wait: the rest of the fleet pauses only once the entity hears of it, so it goes now.
    if (
      !('stalls' in outcome) &&
      (outcome.kind === 'rate-limited' || isFailure(outcome.kind)) &&
      outcome.retryAfterMs &&
      !kr.pacing &&
      !this.closed
    ) {
      kr.pacing = true;
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        kr.pacing = false;
        void this.flushKey(key, kr);
      }, this.o.failureFlushMs);
      this.timers.add(timer);
    }
    const failed = 'stalls' in outcome || isFailure(outcome.kind);
    // Detection must not wait for the batch interval. But a trickle of failures among successes (a partial
    // degradation below any threshold) stays batched, so it cannot become a signal per failure. In a large
    // fleet only the flushers of the moment send at once: the others' failures wait for their next report
    // (or a later second they are drawn in), so an outage costs the entity about as many signals as one worker's.
    const now = Date.now();
    if (failed) kr.failuresHeldSince ??= now;
    const heldTooLong = kr.failuresHeldSince !== null && now - kr.failuresHeldSince >= MAX_FAILURE_HOLD_MS;
    if (
      failed &&
      !kr.alarm &&
      !this.closed &&
      kr.buffer.recentlyFailing(now) &&
      (heldTooLong || this.flushes.flushesNow(this.o.reporter, key, this.schedule.reporters(key), now))
    ) {
      // Failures that keep coming gather for longer (10x), so a failing process sends two reports a second.
      const gatherMs = Date.now() - kr.alarmEndedAt < 1_000 ? 10 * this.o.failureFlushMs : this.o.failureFlushMs;
      kr.alarm = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          void this.flushKey(key, kr).finally(() => {
            this.views.invalidate(key); // read the entity's verdict on what we just told it
            kr.alarm = null;
            kr.alarmEndedAt = Date.now();
            resolve();
          });
        }, gatherMs);
        this.timers.add(timer);
      });
    }
  }

  /**
   * A quarter or more of this process's recent outcomes for `key` (within a report interval) failed: its view
   * is kept fresher, so it learns of a trip at once whether or not it is among the flushers.
   */
  failing(key: string): boolean {
    return this.keys.get(key)?.buffer.recentlyFailing() ?? false;
  }

  /** The failure report on its way for `key`, if any. */
  alarm(key: string): Promise<void> | null {
    return this.keys.get(key)?.alarm ?? null;
  }

  /** When this process last reported to `key`'s entity; 0 if never. */
  reportedAt(key: string): number {
    return this.keys.get(key)?.reportedAt ?? 0;
  }

  /** Nothing buffered for `key`. */
  empty(key: string): boolean {
    return this.keys.get(key)?.buffer.empty ?? true;
  }

  /** An empty report: the entity counts this process among a rate-limited endpoint's sharers. */
  sendEmpty(key: string): Promise<void> {
    return this.send(key, this.entry(key), { reporter: this.o.reporter, counts: {} });
  }

  /** Sends every buffered report now. */
  async flush(): Promise<void> {
    await Promise.all([...this.keys].map(([key, kr]) => this.flushKey(key, kr)));
  }

  /** Sends the buffered reports whose key is due (report-spacing.ts). */
  async flushDue(): Promise<void> {
    const now = Date.now();
    await Promise.all(
      [...this.keys].filter(([key]) => this.schedule.isDue(key, now)).map(([key, kr]) => this.flushKey(key, kr)),
    );
  }

  /** How often this process reports `key` now (ms): the entity counts it among the key's reporters for two of those. */
  everyMs(key: string): number {
    return this.schedule.everyMs(key);
  }

  /** How long after a report this process can take it that the entity still counts it (ms). */
  countedForMs(key: string): number {
    return countedForMs(this.schedule.everyMs(key));
  }

  /** Stops the interval and the gathering timers; pending alarms are dropped (the caller flushes). */
  stop(): void {
    this.closed = true;
    clearInterval(this.interval);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const kr of this.keys.values()) kr.alarm = null;
  }

  private entry(key: string): KeyReports {
    let kr = this.keys.get(key);
    if (!kr) {
      kr = {
        buffer: new ReportBuffer(this.o.reportIntervalMs),
        alarm: null,
        alarmEndedAt: 0,
        started: false,
        reportedAt: 0,
        pacing: false,
        probeSent: null,
        failuresHeldSince: null,
      };
      this.keys.set(key, kr);
    }
    return kr;
  }

  private async flushKey(key: string, kr: KeyReports): Promise<void> {
    if (kr.buffer.empty) return;
    await this.send(key, kr, kr.buffer.take(this.o.reporter));
  }

  private async send(key: string, kr: KeyReports, report: OutcomeReport): Promise<void> {
    kr.failuresHeldSince = null;
    const view = this.views.last(key);
    if (view) report.generation = view.generation;
    report.inFlight = this.inFlight(key);
    report.everyMs = this.schedule.everyMs(key);
    if (this.o.witness) report.witness = this.o.witness;
    // Due again one (jittered) interval from now, whether this one lands or is dropped.
    this.schedule.reported(key, Date.now());
    const probe = this.probeFor(key);
    // Once per spec: an entity already running without a self-probe (started before this process knew one)
    // adopts it; the entity ignores it when it has one.
    if (probe && kr.probeSent !== probe.url) report.probe = probe;
    try {
      // A plain signal while the entity is known to run (cheaper for the server); signal-with-start otherwise.
      if (kr.started) {
        const sent = await this.link
          .rpc(() => this.link.handle(key).signal(reportSignal, report))
          .then(
            () => true,
            (err: unknown) => {
              if (isNotFound(err)) return false;
              throw err;
            },
          );
        if (sent) {
          if (report.probe) kr.probeSent = report.probe.url;
          this.stats.reportsSent++;
          kr.reportedAt = Date.now();
          this.link.losses.delivered(key);
          return;
        }
        kr.started = false;
      }
      await this.link.rpc(() =>
        this.o.client.workflow.signalWithStart<BreakerEntityWorkflow, [OutcomeReport]>(BREAKER_ENTITY_WORKFLOW, {
          workflowId: breakerWorkflowId(key),
          taskQueue: this.o.taskQueue,
          args: [
            {
              key,
              ...(this.o.config ? { config: this.o.config } : {}),
              ...(probe ? { probe } : {}),
              ...(this.o.entityOptions ? { options: this.o.entityOptions } : {}),
            },
          ],
          signal: reportSignal,
          signalArgs: [report],
        }),
      );
      kr.started = true;
      if (report.probe) kr.probeSent = report.probe.url;
      kr.reportedAt = Date.now();
      this.stats.reportsSent++;
      this.link.losses.delivered(key);
    } catch (err) {
      // Dropped, not retried: a stale report is worth less than a pipeline that keeps moving. Counted (a
      // metric, and past a few in a row the key's calls count as failing open: report-loss.ts).
      this.link.reportDropped(key, err);
    }
  }
}
