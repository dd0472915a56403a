import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  breakerView,
  breakerWorkflowId,
  DEFAULT_POLICY_CONFIG,
  initialState,
  isFailure,
  parsePolicyConfig,
  permitFor,
  rateShare,
  type ProbeDecision,
  type BreakerStateName,
  type BreakerView,
  type OutcomeKind,
  type PolicyConfigInput,
  type ProbeToken,
} from '../../breaker';
import {
  BREAKER_ENTITY_WORKFLOW,
  cancelProbeSignal,
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  viewQuery,
  type BreakerEntityWorkflow,
  type EntityOptions,
  type OutcomeReport,
  type ProbeSpec,
} from '../../messages/breaker';
import { ReportBuffer } from './report-buffer';

export interface GuardOptions {
  client: Client;
  /** Task queue of the workers that run breaker entity workflows (and their probe activity). */
  taskQueue: string;
  /** Who reports: one id per worker process. */
  reporter: string;
  /** Policy configuration for entities this guard creates (an existing entity keeps its own). */
  config?: PolicyConfigInput;
  /** The entity's self-probe for a key, used when this guard creates it. */
  probe?: ProbeSpec | ((key: string) => ProbeSpec | undefined);
  entityOptions?: EntityOptions;
  /** Outcomes are reported once per interval per key (failures at once). Default 1 000 ms. */
  reportIntervalMs?: number;
  /** A cached view is used for this long. Default 1 000 ms. */
  cacheTtlMs?: number;
  /**
   * When this process's recent outcomes turn bad (a quarter or more failing), failures are reported after
   * this short gathering delay instead of at the interval, and the next call waits for the report to land
   * and re-reads the state first. Default 50 ms.
   */
  failureFlushMs?: number;
  /** A query or signal that takes longer counts as unreachable: fail open. Default 2 000 ms. */
  rpcTimeoutMs?: number;
  /** First delay between reads of a pending probe decision (it doubles up to 100 ms). Default 5 ms. */
  probePollMs?: number;
  logger?: { warn(message: string, meta?: Record<string, unknown>): void };
}

export type GuardDecision =
  /** Call the endpoint. `allowance` is the share of normal concurrency allowed (the ramp after a recovery). */
  | { kind: 'proceed'; key: string; state: BreakerStateName; allowance: number; failOpen: boolean }
  /** Call the endpoint once as the fleet's probe, and release with its outcome. */
  | { kind: 'probe'; key: string; token: ProbeToken }
  /** Do not call; come back after retryAfterMs (null: no known end) and apply the pipeline's fallback. */
  | { kind: 'refused'; key: string; state: BreakerStateName; retryAfterMs: number | null; reason: string };

export interface CallOutcome {
  kind: OutcomeKind;
  latencyMs?: number;
  retryAfterMs?: number;
}

export interface GuardStats {
  /** Calls that proceeded because the entity could not be reached. */
  failOpen: number;
  refused: number;
  probesGranted: number;
  /** Reads of the entity's state (describe, or the view query for entities without the memo). */
  viewReads: number;
  reportsSent: number;
  reportErrors: number;
}

interface KeyState {
  view: BreakerView | null;
  fetchedAt: number;
  inflight: Promise<BreakerView | null> | null;
  /** After a failed read: fail open at once until then, instead of waiting out another timeout per call. */
  unreachableUntil: number;
  buffer: ReportBuffer;
  /** A failure report on its way (gathering, then sending): calls wait for it and then re-read the state. */
  alarm: Promise<void> | null;
  alarmEndedAt: number;
  probePending: Promise<GuardDecision> | null;
  /** The entity is known to be running (a signal-with-start succeeded): reports go as plain signals. */
  started: boolean;
  /** When this process last reported to the entity (it counts among the rate's sharers for a while after). */
  reportedAt: number;
  /** The latest call slot taken under the endpoint's rate limit. */
  lastSlotAt: number;
  joining: Promise<void> | null;
  /** Last use of the key's rate limit, and the timer that keeps this process counted meanwhile. */
  lastRateUseAt: number;
  keepalive: NodeJS.Timeout | null;
}

const KEEPALIVE_EVERY_MS = 2_000;
const KEEPALIVE_IDLE_MS = 10_000;
const MAX_SLOT_GAP_MS = 60_000;

const JOIN_SETTLE_MS = 300;
const JOIN_READS = 8;
const JOIN_READ_EVERY_MS = 100;

/** Less than the entity's reporter TTL (5 s): past this, assume the entity no longer counts this process. */
const REPORTED_RECENTLY_MS = 3_000;

/**
 * The worker side of a fleet-wide breaker. Decides each call from a per-process view of the entity (read by
 * query, at most `cacheTtlMs` old, one query in flight per key), reports outcomes in batches by
 * signal-with-start (failures at once), takes half-open probe tokens, and fails open when Temporal cannot
 * be reached: the coordination store must never halt the pipeline.
 */
export class BreakerGuard {
  readonly stats: GuardStats = { failOpen: 0, refused: 0, probesGranted: 0, viewReads: 0, reportsSent: 0, reportErrors: 0 };
  private readonly keys = new Map<string, KeyState>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly timer: NodeJS.Timeout;
  private requestSeq = 0;
  private failOpenLoggedAt = 0;
  private failOpenSinceLog = 0;
  private closed = false;
  private readonly o: Required<Omit<GuardOptions, 'config' | 'probe' | 'entityOptions'>> & Pick<GuardOptions, 'config' | 'probe' | 'entityOptions'>;

  constructor(options: GuardOptions) {
    // A bad configuration is the caller's error, now: not a failed entity run per report later.
    if (options.config) parsePolicyConfig(options.config);
    this.o = {
      reportIntervalMs: 1_000,
      cacheTtlMs: 1_000,
      failureFlushMs: 50,
      rpcTimeoutMs: 2_000,
      probePollMs: 5,
      logger: { warn: (message, meta) => console.warn(`tilebreaker guard: ${message}`, meta ?? '') },
      ...options,
    };
    this.timer = setInterval(() => void this.flush(), this.o.reportIntervalMs);
    this.timer.unref();
  }

  /** Decides one call to the endpoint of `key` (a canonical breaker key). */
  async acquire(key: string): Promise<GuardDecision> {
    const ks = this.keyState(key);
    // This process has just seen failures: let the entity hear of them and read its verdict before calling
    // again, but never wait long on it (a busy server must not stall the pipeline).
    if (ks.alarm) await Promise.race([ks.alarm, new Promise((r) => setTimeout(r, 4 * this.o.failureFlushMs))]);
    let view = await this.view(key, ks);
    if (view === undefined) return this.failOpen(key);
    // No entity yet (or it finished idle): closed until someone reports otherwise.
    let permit = permitFor(view ?? CLOSED_VIEW, Date.now());
    const rate = permit.allow ? await this.rateFor(key, ks, view, permit.allowance) : null;
    if (rate !== null) {
      await this.pace(ks, rate);
      // The wait for a slot can be long: decide again on the state as it is now (the breaker may have opened).
      view = await this.view(key, ks);
      if (view === undefined) return this.failOpen(key);
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
    if (ks.probePending) {
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: this process is already asking for the probe token' };
    }
    ks.probePending = this.requestProbe(key, ks).finally(() => {
      ks.probePending = null;
    });
    return ks.probePending;
  }

  /**
   * A call made under `decision` that ended without an answer from the endpoint (we aborted it: the activity
   * was cancelled). It says nothing about the endpoint's health: a probe token is handed back as a neutral
   * result (released, not counted); an ordinary call reports nothing.
   */
  abandon(decision: GuardDecision): void {
    if (decision.kind === 'probe') this.release(decision, { kind: 'neutral' });
  }

  /**
   * This process's share of a rate-limited endpoint (requests/s), or null without a limit. Joins the entity's
   * count of sharers first if it is not in it, and keeps it there while the key is in use.
   */
  private async rateFor(key: string, ks: KeyState, view: BreakerView | null, allowance: number): Promise<number | null> {
    // No entity yet: the rate this guard would create it with.
    const ownRate = this.o.config?.maxRequestsPerSecond ?? null;
    let rateView = view ?? (ownRate ? { ...CLOSED_VIEW, rateLimit: ownRate, activeReporters: 0 } : null);
    if (rateView?.rateLimit === undefined) return null;
    ks.lastRateUseAt = Date.now();
    this.keepCounted(key, ks);
    if (ks.joining) await ks.joining;
    if (Date.now() - ks.reportedAt >= REPORTED_RECENTLY_MS) {
      // Not among the rate's sharers yet: tell the entity, and read the count that includes this process,
      // so that workers starting together do not each take the whole rate.
      ks.joining ??= this.join(key, ks, rateView.activeReporters ?? 0).finally(() => (ks.joining = null));
      await ks.joining;
      rateView = ks.view ?? rateView;
    }
    return rateShare(rateView, allowance, Date.now() - ks.reportedAt < REPORTED_RECENTLY_MS);
  }

  /**
   * A worker whose share is small calls less often than the entity forgets sharers (5 s): an empty report
   * every 2 s while the key is in use keeps it counted, so the others' shares do not grow past the limit.
   */
  private keepCounted(key: string, ks: KeyState): void {
    if (ks.keepalive || this.closed) return;
    ks.keepalive = setInterval(() => {
      if (Date.now() - ks.lastRateUseAt > KEEPALIVE_IDLE_MS) {
        clearInterval(ks.keepalive!);
        ks.keepalive = null;
        return;
      }
      if (Date.now() - ks.reportedAt >= KEEPALIVE_EVERY_MS && ks.buffer.empty) this.track(this.send(key, ks, { reporter: this.o.reporter, counts: {} }));
    }, KEEPALIVE_EVERY_MS);
    ks.keepalive.unref();
  }

  /**
   * Spaces this process's calls to a rate-limited endpoint at its share of the fleet-wide rate: each call
   * takes the next slot 1/rate after the previous one at the current rate (no bursts), whichever activity
   * makes it. A gap is capped at MAX_SLOT_GAP_MS (a tiny share at the start of a ramp must not park a call
   * for hours, nor overflow a timer).
   */
  private async pace(ks: KeyState, rate: number): Promise<void> {
    const now = Date.now();
    const gap = Math.min(1_000 / rate, MAX_SLOT_GAP_MS);
    // The first call takes a random slot within the first gap: workers starting together do not burst.
    const slot = ks.lastSlotAt === 0 ? now + Math.random() * gap : Math.max(now, ks.lastSlotAt + gap);
    ks.lastSlotAt = slot;
    if (slot > now) await new Promise((r) => setTimeout(r, slot - now));
  }

  /** Records the outcome of a call made under `decision`. */
  release(decision: GuardDecision, outcome: CallOutcome): void {
    if (decision.kind === 'refused') return;
    const ks = this.keyState(decision.key);
    if (decision.kind === 'probe') {
      // The probe's result goes at once: the fleet is waiting on it. Re-read the state after it.
      ks.fetchedAt = 0;
      this.track(
        this.signal(decision.key, (h) =>
          h.signal(probeResultSignal, {
            generation: decision.token.generation,
            outcome: outcome.kind,
            reporter: this.o.reporter,
            ...(outcome.latencyMs !== undefined ? { latencyMs: outcome.latencyMs } : {}),
            ...(outcome.retryAfterMs ? { retryAfterMs: outcome.retryAfterMs } : {}),
          }),
        ),
      );
      return;
    }
    ks.buffer.add(outcome.kind, outcome.latencyMs, outcome.retryAfterMs);
    // Detection must not wait for the batch interval. But a trickle of failures among successes (a partial
    // degradation below any threshold) stays batched, so it cannot become a signal per failure.
    if (isFailure(outcome.kind) && !ks.alarm && !this.closed && ks.buffer.failures * 4 >= ks.buffer.outcomes) {
      const key = decision.key;
      // Failures that keep coming gather for longer (10x), so a failing process sends two reports a second.
      const gatherMs = Date.now() - ks.alarmEndedAt < 1_000 ? 10 * this.o.failureFlushMs : this.o.failureFlushMs;
      ks.alarm = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          void this.flushKey(key, ks).finally(() => {
            ks.fetchedAt = 0; // read the entity's verdict on what we just told it
            ks.alarm = null;
            ks.alarmEndedAt = Date.now();
            resolve();
          });
        }, gatherMs);
        this.timers.add(timer);
      });
    }
  }

  /** Sends every buffered report now. */
  async flush(): Promise<void> {
    await Promise.all([...this.keys].map(([key, ks]) => this.flushKey(key, ks)));
  }

  /** Flushes and stops the interval timer; waits for signals in flight. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const ks of this.keys.values()) {
      ks.alarm = null;
      if (ks.keepalive) clearInterval(ks.keepalive);
      ks.keepalive = null;
    }
    await this.flush();
    await Promise.allSettled([...this.pending]);
  }

  private keyState(key: string): KeyState {
    let ks = this.keys.get(key);
    if (!ks) {
      ks = { view: null, fetchedAt: 0, inflight: null, unreachableUntil: 0, buffer: new ReportBuffer(), alarm: null, alarmEndedAt: 0, probePending: null, started: false, reportedAt: 0, lastSlotAt: 0, joining: null, lastRateUseAt: 0, keepalive: null };
      this.keys.set(key, ks);
    }
    return ks;
  }

  /** The cached view; null when no entity exists; undefined when the entity cannot be reached. */
  private async view(key: string, ks: KeyState): Promise<BreakerView | null | undefined> {
    const now = Date.now();
    if (now < ks.unreachableUntil) return undefined;
    // While this process reports failures, its view is kept fresher (a quarter of the TTL), so it learns of
    // the trip its failures may have caused within moments, not at the next full refresh.
    const ttl = ks.alarm ? this.o.cacheTtlMs / 4 : this.o.cacheTtlMs;
    if (ks.fetchedAt && now - ks.fetchedAt < ttl) return ks.view;
    if (!ks.inflight) {
      this.stats.viewReads++;
      ks.inflight = this.rpc(() => this.readView(key))
        .then(
          (view) => view,
          (err: unknown) => {
            if (isNotFound(err)) return null;
            ks.unreachableUntil = Date.now() + this.o.cacheTtlMs;
            this.noteUnreachable(key, err);
            throw err;
          },
        )
        .then((view) => {
          if (view === 'starting') {
            ks.fetchedAt = 0;
            return null;
          }
          ks.view = view;
          ks.fetchedAt = Date.now();
          return view;
        })
        .finally(() => {
          ks.inflight = null;
        });
    }
    try {
      return await ks.inflight;
    } catch {
      return undefined;
    }
  }

  /**
   * The entity's view, from the memo it keeps (DescribeWorkflowExecution, answered by the server without the
   * worker), or by the `view` query from an entity that keeps none. A finished entity (idle) reads as none.
   */
  private async readView(key: string): Promise<BreakerView | null | 'starting'> {
    const handle = this.handle(key);
    const d = await handle.describe();
    if (d.status.name !== 'RUNNING') return null;
    const view = d.memo?.['view'] as BreakerView | undefined;
    if (view) return view;
    // No memo yet: a run this young has not finished its first workflow task, so it is closed (but an admin
    // signal may be waiting in it, so the answer is not cached); an older one predates the memo: query it.
    const young = d.historyLength <= 10 || Date.now() - d.startTime.getTime() < 60_000;
    return young ? 'starting' : handle.query(viewQuery);
  }

  private async requestProbe(key: string, ks: KeyState): Promise<GuardDecision> {
    const requestId = `${this.o.reporter}/${Date.now()}/${++this.requestSeq}`;
    const deadline = Date.now() + this.o.rpcTimeoutMs;
    try {
      await this.rpc(() => this.handle(key).signal(requestProbeSignal, { requestId, requester: this.o.reporter }));
    } catch (err) {
      // The state was just read (half-open: the endpoint is not known to be healthy), so this is a slow or
      // briefly unavailable server, not a lost coordination store: refuse and ask again shortly. If Temporal is
      // really gone, the next read fails and the guard fails open then.
      this.noteUnreachable(key, err);
      this.stats.refused++;
      return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: 'half-open: the probe request did not reach the entity' };
    }
    // The decision is usually there on the first read; back off (5, 10, 20 ... 100 ms) while it is not.
    let pause = this.o.probePollMs;
    while (Date.now() < deadline) {
      const decision = await this.rpc(() => this.handle(key).query(probeDecisionQuery, requestId)).catch(() => null);
      if (decision) {
        ks.fetchedAt = 0; // the state moved: read it afresh next time
        return this.fromProbeDecision(key, decision);
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(0, deadline - Date.now()))));
      pause = Math.min(pause * 2, 100);
    }
    // The entity is too slow to answer. Give the token back if it was granted (so it does not sit out its
    // lease), and do not call: half-open means the endpoint is not known to be healthy.
    this.track(this.signal(key, (h) => h.signal(cancelProbeSignal, { requestId })));
    this.stats.refused++;
    return { kind: 'refused', key, state: 'half-open', retryAfterMs: this.o.cacheTtlMs, reason: `half-open: no probe decision within ${this.o.rpcTimeoutMs} ms` };
  }

  private fromProbeDecision(key: string, d: ProbeDecision): GuardDecision {
    switch (d.kind) {
      case 'granted':
        this.stats.probesGranted++;
        return { kind: 'probe', key, token: d.token };
      case 'not-needed':
        return { kind: 'proceed', key, state: d.state, allowance: 1, failOpen: false };
      case 'denied':
        this.stats.refused++;
        return {
          kind: 'refused',
          key,
          state: d.reason === 'busy' ? 'half-open' : d.reason,
          // A busy token frees when its holder reports; look again soon rather than after the whole lease.
          retryAfterMs: d.reason === 'busy' ? Math.min(d.retryAfterMs ?? this.o.cacheTtlMs, this.o.cacheTtlMs) : d.retryAfterMs,
          reason: d.reason === 'busy' ? 'half-open: another worker holds the probe token' : `breaker ${d.reason}`,
        };
    }
  }

  /** An empty report, so the entity counts this process among a rate-limited endpoint's sharers at once. */
  private async join(key: string, ks: KeyState, countBefore: number): Promise<void> {
    await this.send(key, ks, { reporter: this.o.reporter, counts: {} });
    // The entity publishes its new count in the memo within a workflow task or two: wait long enough for
    // workers starting at the same moment to be counted together, then read until the count shows this one.
    await new Promise((r) => setTimeout(r, JOIN_SETTLE_MS));
    for (let i = 0; i < JOIN_READS; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, JOIN_READ_EVERY_MS));
      ks.fetchedAt = 0;
      const v = await this.view(key, ks);
      if (!v || (v.activeReporters ?? 0) > countBefore) return;
    }
  }

  private async flushKey(key: string, ks: KeyState): Promise<void> {
    if (ks.buffer.empty) return;
    await this.send(key, ks, ks.buffer.take(this.o.reporter));
  }

  private async send(key: string, ks: KeyState, report: OutcomeReport): Promise<void> {
    if (ks.view) report.generation = ks.view.generation;
    const probe = typeof this.o.probe === 'function' ? this.o.probe(key) : this.o.probe;
    try {
      // A plain signal while the entity is known to run (cheaper for the server); signal-with-start otherwise.
      if (ks.started) {
        const sent = await this.rpc(() => this.handle(key).signal(reportSignal, report)).then(
          () => true,
          (err: unknown) => {
            if (isNotFound(err)) return false;
            throw err;
          },
        );
        if (sent) {
          this.stats.reportsSent++;
          ks.reportedAt = Date.now();
          return;
        }
        ks.started = false;
      }
      await this.rpc(() =>
        this.o.client.workflow.signalWithStart<BreakerEntityWorkflow, [OutcomeReport]>(BREAKER_ENTITY_WORKFLOW, {
          workflowId: breakerWorkflowId(key),
          taskQueue: this.o.taskQueue,
          args: [{ key, ...(this.o.config ? { config: this.o.config } : {}), ...(probe ? { probe } : {}), ...(this.o.entityOptions ? { options: this.o.entityOptions } : {}) }],
          signal: reportSignal,
          signalArgs: [report],
        }),
      );
      ks.started = true;
      ks.reportedAt = Date.now();
      this.stats.reportsSent++;
    } catch (err) {
      // Dropped, not retried: a stale report is worth less than a pipeline that keeps moving.
      this.stats.reportErrors++;
      this.noteUnreachable(key, err);
    }
  }

  private signal(key: string, send: (h: ReturnType<BreakerGuard['handle']>) => Promise<void>): Promise<void> {
    return this.rpc(() => send(this.handle(key))).catch((err: unknown) => {
      this.stats.reportErrors++;
      this.noteUnreachable(key, err);
    });
  }

  private handle(key: string) {
    return this.o.client.workflow.getHandle(breakerWorkflowId(key));
  }

  private rpc<T>(fn: () => Promise<T>): Promise<T> {
    return this.o.client.connection.withDeadline(Date.now() + this.o.rpcTimeoutMs, fn);
  }

  private failOpen(key: string): GuardDecision {
    this.stats.failOpen++;
    this.failOpenSinceLog++;
    return { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: true };
  }

  /** Logs unreachability at most once per report interval, with how many calls failed open meanwhile. */
  private noteUnreachable(key: string, err: unknown): void {
    const now = Date.now();
    if (now - this.failOpenLoggedAt < this.o.reportIntervalMs) return;
    this.failOpenLoggedAt = now;
    this.o.logger.warn('breaker entity unreachable; failing open', {
      key,
      error: err instanceof Error ? err.message : String(err),
      failOpenSinceLastLog: this.failOpenSinceLog,
      failOpenTotal: this.stats.failOpen,
    });
    this.failOpenSinceLog = 0;
  }

  private track(p: Promise<unknown>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }
}

/** What a breaker that does not exist yet is: a fresh one, closed. */
const CLOSED_VIEW: BreakerView = breakerView(initialState(DEFAULT_POLICY_CONFIG));

function isNotFound(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof Error && err.name === 'WorkflowNotFoundError');
}
