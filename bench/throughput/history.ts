/** What the throughput benches read from a mosaic's histories: every workflow of the job and its fetch phase. */
import type { Client } from '@temporalio/client';

/** The histories of a mosaic and of its block children, the mosaic's first. */
export async function histories(client: Client, id: string) {
  const ids = [id];
  for await (const wf of client.workflow.list({ query: `WorkflowId STARTS_WITH "${id}/"` })) ids.push(wf.workflowId);
  return Promise.all(ids.map(async (w) => (await client.workflow.getHandle(w).fetchHistory()).events ?? []));
}

export type HistoryEvent = Awaited<ReturnType<typeof histories>>[number][number];

export const eventMs = (e: HistoryEvent) => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;

/** The fetch phase of a mosaic's own history, in ms on the history's clock: from the planning activity's completion to the assembly's scheduling. */
export function fetchPhase(mosaic: HistoryEvent[]): [number, number] {
  const completions = mosaic.filter((e) => e.activityTaskCompletedEventAttributes);
  const scheduled = mosaic.filter((e) => e.activityTaskScheduledEventAttributes);
  return [eventMs(completions[0]!), eventMs(scheduled[scheduled.length - 1]!)];
}
