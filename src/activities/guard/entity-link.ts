import { WorkflowNotFoundError } from '@temporalio/client';
import { breakerWorkflowId } from '../../breaker';
import type { GuardDecision, GuardStats, ResolvedGuardOptions } from './types';

/**
 * How the guard reaches the entities: a handle per key, every call under the RPC deadline, unreachability
 * logged at most once per report interval (with the calls that failed open meanwhile), and the signals
 * still in flight, which close() waits for.
 */
export class EntityLink {
  private readonly pending = new Set<Promise<unknown>>();
  private failOpenLoggedAt = 0;
  private failOpenSinceLog = 0;

  constructor(
    private readonly o: ResolvedGuardOptions,
    private readonly stats: GuardStats,
  ) {}

  handle(key: string) {
    return this.o.client.workflow.getHandle(breakerWorkflowId(key));
  }

  rpc<T>(fn: () => Promise<T>): Promise<T> {
    return this.o.client.connection.withDeadline(Date.now() + this.o.rpcTimeoutMs, fn);
  }

  /** A signal whose failure is counted and logged, never thrown: the pipeline does not wait on it. */
  signal(key: string, send: (h: ReturnType<EntityLink['handle']>) => Promise<void>): Promise<void> {
    return this.rpc(() => send(this.handle(key))).catch((err: unknown) => {
      this.stats.reportErrors++;
      this.noteUnreachable(key, err);
    });
  }

  /** The decision when the entity cannot be reached: proceed, as if closed. */
  failOpen(key: string): GuardDecision {
    this.stats.failOpen++;
    this.failOpenSinceLog++;
    return { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: true };
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
    void p.finally(() => this.pending.delete(p));
  }

  /** Waits for every tracked signal to settle. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof Error && err.name === 'WorkflowNotFoundError');
}
