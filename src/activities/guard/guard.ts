import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  breakerWorkflowId,
  isFailure,
  permitFor,
  type BreakerStateName,
  type BreakerView,
  type OutcomeKind,
  type PolicyConfigInput,
  type ProbeDecision,
  type ProbeToken,
} from '../../breaker';
// Types only: activities never load workflow code.
import type { breakerEntityWorkflow } from '../../workflows/breaker-entity';
import {
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  viewQuery,
  type EntityOptions,
  type OutcomeReport,
  type ProbeSpec,
} from '../../workflows/breaker-messages';
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
  /** ... and for this long while this process is seeing failures, so it learns of a trip sooner. Default 100 ms. */
  alertCacheTtlMs?: number;
  /** A query or signal that takes longer counts as unreachable: fail open. Default 2 000 ms. */
  rpcTimeoutMs?: number;
  /** How often to read a pending probe decision. Default 10 ms. */
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
  queries: number;
  reportsSent: number;
  reportErrors: number;
}

interface KeyState {
  view: BreakerView | null;
  fetchedAt: number;
  inflight: Promise<BreakerView | null> | null;
  buffer: ReportBuffer;
  alertUntil: number;
  probePending: Promise<GuardDecision> | null;
  flushScheduled: boolean;
}

/**
 * The worker side of a fleet-wide breaker. Decides each call from a per-process view of the entity (read by
 * query, at most `cacheTtlMs` old, one query in flight per key), reports outcomes in batches by
 * signal-with-start (failures at once), takes half-open probe tokens, and fails open when Temporal cannot
 * be reached: the coordination store must never halt the pipeline.
 */
export class BreakerGuard {
  readonly stats: GuardStats = { failOpen: 0, refused: 0, probesGranted: 0, queries: 0, reportsSent: 0, reportErrors: 0 };
  private readonly keys = new Map<string, KeyState>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly timer: NodeJS.Timeout;
  private requestSeq = 0;
  private failOpenLoggedAt = 0;
  private failOpenSinceLog = 0;
  private closed = false;
  private readonly o: Required<Omit<GuardOptions, 'config' | 'probe' | 'entityOptions'>> & Pick<GuardOptions, 'config' | 'probe' | 'entityOptions'>;

  constructor(options: GuardOptions) {
    this.o = {
      reportIntervalMs: 1_000,
      cacheTtlMs: 1_000,
      alertCacheTtlMs: 100,
      rpcTimeoutMs: 2_000,
      probePollMs: 10,
      logger: { warn: (message, meta) => console.warn(`tilebreaker guard: ${message}`, meta ?? '') },
      ...options,
    };
    this.timer = setInterval(() => void this.flush(), this.o.reportIntervalMs);
    this.timer.unref();
  }

  /** Decides one call to the endpoint of `key` (a canonical breaker key). */
  async acquire(key: string): Promise<GuardDecision> {
    const ks = this.keyState(key);
    const view = await this.view(key, ks);
    if (view === undefined) return this.failOpen(key);
    // No entity yet (or it finished idle): closed until someone reports otherwise.
    const permit = permitFor(view ?? closedView(), Date.now());
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

  /** Records the outcome of a call made under `decision`. */
  release(decision: GuardDecision, outcome: CallOutcome): void {
    if (decision.kind === 'refused') return;
    const ks = this.keyState(decision.key);
    if (decision.kind === 'probe') {
      // The probe's result goes at once: the fleet is waiting on it.
      ks.view = null;
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
    if (isFailure(outcome.kind)) {
      // Detection must not wait for the batch interval: failures go now, and this process re-reads the
      // state sooner for a while, so it learns of the trip it may have caused.
      ks.alertUntil = Date.now() + 5 * this.o.reportIntervalMs;
      if (!ks.flushScheduled) {
        ks.flushScheduled = true;
        setImmediate(() => {
          ks.flushScheduled = false;
          this.track(this.flushKey(decision.key, ks));
        });
      }
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
    await this.flush();
    await Promise.allSettled([...this.pending]);
  }

  private keyState(key: string): KeyState {
    let ks = this.keys.get(key);
    if (!ks) {
      ks = { view: null, fetchedAt: 0, inflight: null, buffer: new ReportBuffer(), alertUntil: 0, probePending: null, flushScheduled: false };
      this.keys.set(key, ks);
    }
    return ks;
  }

  /** The cached view; null when no entity exists; undefined when the entity cannot be reached. */
  private async view(key: string, ks: KeyState): Promise<BreakerView | null | undefined> {
    const now = Date.now();
    // The short TTL only while closed: it exists to notice a trip sooner. Once the view is open, it stays
    // right until its cooldown ends, and re-reading it faster would only load the entity.
    const alert = now < ks.alertUntil && ks.view?.state !== 'open' && ks.view?.state !== 'forced-open';
    const ttl = alert ? this.o.alertCacheTtlMs : this.o.cacheTtlMs;
    if (ks.fetchedAt && now - ks.fetchedAt < ttl) return ks.view;
    if (!ks.inflight) {
      this.stats.queries++;
      ks.inflight = this.rpc(() => this.handle(key).query(viewQuery))
        .then(
          (view) => view,
          (err: unknown) => {
            if (isNotFound(err)) return null;
            this.noteUnreachable(key, err);
            throw err;
          },
        )
        .then((view) => {
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

  private async requestProbe(key: string, ks: KeyState): Promise<GuardDecision> {
    const requestId = `${this.o.reporter}/${Date.now()}/${++this.requestSeq}`;
    try {
      await this.rpc(() => this.handle(key).signal(requestProbeSignal, { requestId, requester: this.o.reporter }));
      const deadline = Date.now() + this.o.rpcTimeoutMs;
      for (;;) {
        const decision: ProbeDecision | null = await this.rpc(() => this.handle(key).query(probeDecisionQuery, requestId));
        if (decision) {
          ks.fetchedAt = 0; // the state moved: read it afresh next time
          return this.fromProbeDecision(key, decision);
        }
        if (Date.now() > deadline) throw new Error(`no decision for probe request ${requestId} within ${this.o.rpcTimeoutMs} ms`);
        await new Promise((r) => setTimeout(r, this.o.probePollMs));
      }
    } catch (err) {
      this.noteUnreachable(key, err);
      return this.failOpen(key);
    }
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

  private async flushKey(key: string, ks: KeyState): Promise<void> {
    if (ks.buffer.empty) return;
    const report = ks.buffer.take(this.o.reporter);
    const probe = typeof this.o.probe === 'function' ? this.o.probe(key) : this.o.probe;
    try {
      await this.rpc(() =>
        this.o.client.workflow.signalWithStart<typeof breakerEntityWorkflow, [OutcomeReport]>('breakerEntityWorkflow', {
          workflowId: breakerWorkflowId(key),
          taskQueue: this.o.taskQueue,
          args: [{ key, ...(this.o.config ? { config: this.o.config } : {}), ...(probe ? { probe } : {}), ...(this.o.entityOptions ? { options: this.o.entityOptions } : {}) }],
          signal: reportSignal,
          signalArgs: [report],
        }),
      );
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

function closedView(): BreakerView {
  return { state: 'closed', mode: 'auto', phase: 'closed', cooldownUntil: null, forcedUntil: null, rampStartedAt: null, rampMs: 0, rampFloor: 1, probesOutstanding: 0, maxConcurrentProbes: 1 };
}

function isNotFound(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof Error && err.name === 'WorkflowNotFoundError');
}
