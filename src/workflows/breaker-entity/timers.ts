import { condition, patched, workflowInfo } from '@temporalio/workflow';
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
  // Idle means closed and quiet: no reports and no transitions for idleMs. Runs recorded before this rule
  // (idle counted from the last report only) keep the old rule on replay.
  private readonly idleCountsTransitions = patched('idle-after-last-transition');
  // An operator's configure or set-probe is kept by not ending; runs recorded before this rule ended anyway.
  private readonly operatorStateStays = patched('operator-state-stays');

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
    if (this.operatorStateStays && this.entity.operatorSet) return false;
    return policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0;
  }

  /** Quiet for idleMs: the run may finish. */
  idle(): boolean {
    return Date.now() >= this.idleAt();
  }

  /** Time to continue as new (or the server suggests it). */
  historyFull(): boolean {
    return workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= this.opts.maxHistoryEvents;
  }

  private idleAt(): number {
    const { lastReportAt, lastTransitionAt } = this.entity;
    return (this.idleCountsTransitions ? Math.max(lastReportAt, lastTransitionAt) : lastReportAt) + this.opts.idleMs;
  }
}
