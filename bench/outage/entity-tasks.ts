/**
 * How fast the breaker entity's workflow tasks ran under the fleet's load: read every run
 * of the entity's workflow (each continue-as-new starts a new run) back from the server and time each workflow
 * task from WORKFLOW_TASK_SCHEDULED to WORKFLOW_TASK_COMPLETED. That span holds the wait for a worker to pick the
 * task up and the worker's own processing, so a busy entity (slow tasks, tasks queuing behind each other)
 * shows in it; timeouts are counted apart.
 */
import type { Client } from '@temporalio/client';

export interface EntityTaskFigures {
  /** Workflow tasks completed, over every run. */
  n: number;
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** WORKFLOW_TASK_TIMED_OUT events, over every run. */
  timeouts: number;
  runs: number;
  /** The largest continue-as-new input (the carried state and the rest of the input), bytes as stored. */
  carriedBytes: number;
}

type History = Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];

/** Every run of `workflowId` (by visibility: a continue-as-new's runs share the workflow id), then their figures. */
export async function entityTaskFigures(client: Client, workflowId: string): Promise<EntityTaskFigures> {
  const runIds: string[] = [];
  for await (const e of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(workflowId)}` }))
    runIds.push(e.runId);
  const histories: History[] = [];
  for (const runId of runIds) histories.push(await client.workflow.getHandle(workflowId, runId).fetchHistory());
  return taskFigures(histories);
}

/** The figures of some runs' histories (pure: the test feeds it recorded histories). */
export function taskFigures(histories: readonly History[]): EntityTaskFigures {
  const spans: number[] = [];
  let timeouts = 0;
  let carriedBytes = 0;
  for (const h of histories) {
    const scheduledAt = new Map<string, number>();
    for (const e of h.events ?? []) {
      const id = String(e.eventId);
      if (e.workflowTaskScheduledEventAttributes) scheduledAt.set(id, timeOf(e));
      const done = e.workflowTaskCompletedEventAttributes;
      if (done) {
        const at = scheduledAt.get(String(done.scheduledEventId));
        if (at !== undefined) spans.push(timeOf(e) - at);
      }
      if (e.workflowTaskTimedOutEventAttributes) timeouts++;
      const can = e.workflowExecutionContinuedAsNewEventAttributes;
      if (can)
        carriedBytes = Math.max(
          carriedBytes,
          (can.input?.payloads ?? []).reduce((sum, p) => sum + (p.data?.length ?? 0), 0),
        );
    }
  }
  spans.sort((a, b) => a - b);
  const q = (p: number) => (spans.length ? spans[Math.min(spans.length - 1, Math.ceil(p * spans.length) - 1)]! : null);
  return {
    n: spans.length,
    p50Ms: q(0.5),
    p99Ms: q(0.99),
    maxMs: spans.length ? spans[spans.length - 1]! : null,
    timeouts,
    runs: histories.length,
    carriedBytes,
  };
}

/** The detail line the benchmark prints. */
export function entityTaskLine(f: EntityTaskFigures): string {
  const ms = (v: number | null) => (v === null ? 'n/a' : String(Math.round(v)));
  return `  entity workflow tasks: n=${f.n} p50=${ms(f.p50Ms)} p99=${ms(f.p99Ms)} max=${ms(f.maxMs)} timeouts=${f.timeouts} runs=${f.runs} carried-bytes=${f.carriedBytes}`;
}

function timeOf(e: HistoryEvent): number {
  const t = e.eventTime;
  if (!t) return 0;
  return Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6;
}

/** One run of the entity: when it started, and when its first workflow task completed (its memo's first view). */
export interface EntityRunTimes {
  startedAt: number;
  firstTaskDoneAt: number | null;
}

/** When each run of `workflowId` started and first completed a task, oldest first (the peak dump prints them). */
export async function entityRunTimes(client: Client, workflowId: string): Promise<EntityRunTimes[]> {
  const out: EntityRunTimes[] = [];
  for await (const e of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(workflowId)}` })) {
    const h = await client.workflow.getHandle(workflowId, e.runId).fetchHistory();
    const events = h.events ?? [];
    const done = events.find((ev) => ev.workflowTaskCompletedEventAttributes);
    out.push({ startedAt: events[0] ? timeOf(events[0]) : 0, firstTaskDoneAt: done ? timeOf(done) : null });
  }
  return out.sort((a, b) => a.startedAt - b.startedAt);
}
