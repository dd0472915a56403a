import { condition, workflowInfo } from '@temporalio/workflow';
import { nextDeadline } from '../../breaker';
import type { EntityOptions } from '../../messages/breaker';
import type { SelfProbe } from './self-probe';
import type { EntityState } from './state';

/**
 * When the entity's main loop wakes: at the policy's next deadline (a cooldown's end, a lease's expiry, a
 * timed force-open's end), when a self-probe is due or the breaker would go idle, on a durable timer; at once
 * when a handler sets `wake` or the history is full.
 */
export class EntityTimers {
  constructor(
    private readonly entity: EntityState,
    private readonly selfProbe: SelfProbe,
    private readonly opts: Required<EntityOptions>,
  ) {}

  /** Waits for the next deadline, a wake from a handler, or a full history. */
  async sleep(): Promise<void> {
    const now = Date.now();
    const due = [
      nextDeadline(this.entity.policy, now),
      this.selfProbe.due(),
      this.quiet() ? this.idleAt() : null,
    ].filter((t): t is number => t !== null);
    const until = due.length ? Math.max(Math.min(...due), now + 1) : null;
    this.entity.wake = false;
    const woken = () => this.entity.wake || this.historyFull();
    if (until === null) await condition(woken);
    else await condition(woken, until - now);
  }

  /** Closed, automatic, no probe out, nothing an operator set: the only state an entity goes idle in. */
  quiet(): boolean {
    const { policy } = this.entity;
    // An operator's configure or set-probe is kept by not ending.
    if (this.entity.operatorSet) return false;
    return policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0;
  }

  /** Quiet for idleMs: the run may finish. */
  idle(): boolean {
    return Date.now() >= this.idleAt();
  }

  /**
   * Time to continue as new: the history is full (or the server suggests it), or the deployment's current build
   * is no longer the one this run is pinned to (the next run starts on the current one).
   */
  historyFull(): boolean {
    const info = workflowInfo();
    return (
      info.continueAsNewSuggested ||
      info.historyLength >= this.opts.maxHistoryEvents ||
      info.targetWorkerDeploymentVersionChanged
    );
  }

  private idleAt(): number {
    const { lastReportAt, lastTransitionAt } = this.entity;
    // Idle means closed and quiet: no reports and no transitions for idleMs.
    return Math.max(lastReportAt, lastTransitionAt) + this.opts.idleMs;
  }
}
