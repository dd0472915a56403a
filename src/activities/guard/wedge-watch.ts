import type { Timestamp } from '@temporalio/common';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import type { BreakerView } from '../../breaker';

/** The entity's workflow task waiting to be done, as DescribeWorkflowExecution shows it. */
export interface PendingTask {
  /** When the server scheduled it (its clock, epoch ms). */
  scheduledAt: number;
  /** 1 for a first try; more when the task failed or timed out and was tried again. */
  attempt: number;
}

/** The pending workflow task of a DescribeWorkflowExecution answer, if any. */
export function pendingTaskOf(raw: {
  pendingWorkflowTask?: {
    scheduledTime?: Timestamp | null;
    originalScheduledTime?: Timestamp | null;
    attempt?: number | null;
  } | null;
}): PendingTask | null {
  const t = raw.pendingWorkflowTask;
  if (!t) return null;
  const scheduledAt = optionalTsToMs(t.originalScheduledTime) || optionalTsToMs(t.scheduledTime);
  return scheduledAt ? { scheduledAt, attempt: t.attempt ?? 1 } : null;
}

/** What showed an entity wedged: a timer past due in its view, or a workflow task left undone. */
export type WedgeEvidence =
  { kind: 'timer-overdue'; dueAt: number } | { kind: 'task-pending'; since: number; attempt: number };

interface KeyWatch {
  task: PendingTask | null;
  /** When this process first saw the entity's workflow task being retried (attempt > 1), by its own clock. */
  retriedSince: number | null;
  /** The wedge this process is failing open for, from when it saw it. */
  wedgedSince: number | null;
}

/**
 * Tells when a key's entity has stopped making progress while Describe still shows it running with its last
 * memo: its workflow tasks fail (a deploy that breaks determinism) or nobody polls its task queue. Evidence,
 * held for longer than `graceMs`: the view shows a timer that should have fired (an open breaker past its
 * cooldown, a timed force-open past its end), or a workflow task scheduled (or being retried) and not done.
 * A wedged entity hears no report and moves no state, so the guard fails open for it, as for an unreachable
 * one, until a read shows it moving again.
 */
export class WedgeWatch {
  private readonly keys = new Map<string, KeyWatch>();

  constructor(
    private readonly graceMs: number,
    private readonly events: {
      wedged(key: string, evidence: WedgeEvidence): void;
      moving(key: string, wedgedForMs: number): void;
    },
  ) {
    if (!(Number.isFinite(graceMs) && graceMs >= 0))
      throw new RangeError(`wedgeGraceMs must be a number of ms >= 0 (got ${graceMs})`);
  }

  /**
   * Whether `key`'s entity is wedged at `now`, by its latest view (null: none yet, as a run that has not done
   * its first workflow task) and the workflow task its latest read showed waiting. Starts and ends episodes.
   */
  wedged(key: string, view: BreakerView | null, task: PendingTask | null, now: number): boolean {
    const w = this.entry(key);
    w.task = task;
    w.retriedSince = task && task.attempt > 1 ? (w.retriedSince ?? now) : null;
    const evidence = this.evidence(w, view, now);
    if (evidence && w.wedgedSince === null) {
      w.wedgedSince = now;
      this.events.wedged(key, evidence);
    } else if (!evidence && w.wedgedSince !== null) {
      this.events.moving(key, now - w.wedgedSince);
      w.wedgedSince = null;
    }
    return evidence !== null;
  }

  private evidence(w: KeyWatch, view: BreakerView | null, now: number): WedgeEvidence | null {
    if (this.graceMs === 0) return null;
    // The entity wakes at these times and moves on (to half-open): a view still showing them is not moving.
    const dueAt = view?.state === 'open' ? view.cooldownUntil : view?.state === 'forced-open' ? view.forcedUntil : null;
    if (dueAt !== null && dueAt !== undefined && now - dueAt > this.graceMs) return { kind: 'timer-overdue', dueAt };
    const t = w.task;
    if (t && now - t.scheduledAt > this.graceMs)
      return { kind: 'task-pending', since: t.scheduledAt, attempt: t.attempt };
    if (t && w.retriedSince !== null && now - w.retriedSince > this.graceMs)
      return { kind: 'task-pending', since: w.retriedSince, attempt: t.attempt };
    return null;
  }

  private entry(key: string): KeyWatch {
    let w = this.keys.get(key);
    if (!w) {
      w = { task: null, retriedSince: null, wedgedSince: null };
      this.keys.set(key, w);
    }
    return w;
  }
}
