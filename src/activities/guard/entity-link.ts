import { WorkflowNotFoundError } from '@temporalio/client';
import { breakerWorkflowId } from '../../breaker';
import { Reachability } from './reachability';
import { ReportLoss } from './report-loss';
import type { FailOpenReason, GuardDecision, GuardStats, ResolvedGuardOptions } from './types';

/**
 * How the guard reaches the entities: a handle per key, every call under the RPC deadline, unreachability
 * logged at most once per report interval (with the calls that failed open meanwhile), and every call still
 * in flight, which close() waits for.
 */
export class EntityLink {
  private readonly pending = new Set<Promise<unknown>>();
  private failOpenLoggedAt = 0;
  private failOpenSinceLog = 0;
  private closing = false;
  /** Whether Temporal answers this process's reads (fail open at once while it does not). */
  readonly reach: Reachability;
  /** Reports that never reached their entity. */
  readonly losses: ReportLoss;

  constructor(
    private readonly o: ResolvedGuardOptions,
    private readonly stats: GuardStats,
  ) {
    this.reach = new Reachability(o.unreachableRecheckMs);
    this.losses = new ReportLoss(o.blindAfterDrops, stats, o.metrics, o.logger);
  }

  handle(key: string) {
    return this.o.client.workflow.getHandle(breakerWorkflowId(key));
  }

  /**
   * `fn`'s calls under the RPC deadline, tracked until they settle. The client retries an UNAVAILABLE answer on
   * a timer of its own, which a cancel does not stop: a call is over only when its promise settles, and close()
   * waits for that so no retry fires on a connection its owner has closed. Refused once the guard closes.
   */
  rpc<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new Error('the breaker guard is closed: no further calls to Temporal'));
    const p = this.o.client.connection.withDeadline(Date.now() + this.o.rpcTimeoutMs, fn);
    this.track(p);
    return p;
  }

  /** A signal whose failure is counted and logged, never thrown. */
  signal(key: string, send: (h: ReturnType<EntityLink['handle']>) => Promise<void>, report = false): Promise<void> {
    return this.rpc(() => send(this.handle(key))).then(
      () => {
        if (report) this.losses.delivered(key);
      },
      (err: unknown) => {
        if (report) this.losses.dropped(key);
        else this.stats.reportErrors++;
        this.noteUnreachable(key, err);
      },
    );
  }

  /** A report (a probe's result) sent as signal() does; one that fails is a dropped report (report-loss.ts). */
  report(key: string, send: (h: ReturnType<EntityLink['handle']>) => Promise<void>): Promise<void> {
    return this.signal(key, send, true);
  }

  /** A report to `key` failed after the client's retries: dropped, counted and logged. */
  reportDropped(key: string, err: unknown): void {
    this.losses.dropped(key);
    this.noteUnreachable(key, err);
  }

  /** The decision when the entity cannot be reached or is wedged: proceed, as if closed. */
  failOpen(key: string, reason: FailOpenReason = 'unreachable'): GuardDecision {
    this.stats.failOpen++;
    if (reason === 'wedged') this.stats.wedgedFailOpen++;
    else this.failOpenSinceLog++;
    return { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: true, failOpenReason: reason };
  }

  /** Logs unreachability at most once per report interval, with how many calls failed open meanwhile. */
  noteUnreachable(key: string, err: unknown): void {
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

  /** Keeps `p` until it settles, for settled(). */
  track(p: Promise<unknown>): void {
    this.pending.add(p);
    const done = () => this.pending.delete(p);
    p.then(done, done);
  }

  /** Waits for every tracked call to settle, including any started meanwhile. */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  /**
   * Refuses further calls and waits for those in flight: each ends within the RPC deadline plus one of the
   * client's retry delays (at most 6 s), so close() is bounded and leaves no retry timer behind.
   */
  async close(): Promise<void> {
    this.closing = true;
    await this.settled();
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof Error && err.name === 'WorkflowNotFoundError');
}
