import { ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { parseMosaicRequest } from '../messages/mosaic-request';
import type { MosaicRequest } from '../messages/mosaic-types';
import { checkMosaicName, defaultMosaicName } from '../messages/mosaic-names';
import { mosaicAttributesRegistered, startLabels } from './mosaic-names';
import { resolveRequestPaths } from './mosaics';

export interface ScheduleSummary {
  scheduleId: string;
  cron: string[];
  workflowType: string | null;
  paused: boolean;
  nextRuns: string[];
  recentRuns: { startedAt: string; workflowId: string }[];
}

/**
 * A nightly mosaic as a Temporal Schedule. Overlap policy skip: if last night's run is still going (a long
 * outage, a wait policy), tonight's does not start beside it and double the load on the same servers.
 */
export async function createMosaicSchedule(
  client: Client,
  taskQueue: string,
  scheduleId: string,
  cron: string,
  request: MosaicRequest,
  timezone?: string,
  opts: { name?: string } = {},
): Promise<void> {
  const resolved = resolveRequestPaths(request);
  parseMosaicRequest(resolved);
  // Each night's mosaic carries the name, as one started by hand does (`mosaic status NAME`, `mosaic list`).
  const name = opts.name !== undefined ? checkMosaicName(opts.name, '--name') : defaultMosaicName(resolved.output);
  const labels = startLabels({ name, source: resolved.sourceName ?? 'inline', zoom: resolved.zoom, output: resolved.output }, await mosaicAttributesRegistered(client));
  await client.schedule.create({
    scheduleId,
    spec: { cronExpressions: [cron], ...(timezone ? { timezone } : {}) },
    // The server turns cron into calendar specs; keep the words the user wrote for `schedule list`.
    memo: { cron, output: resolved.output, name },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1h' },
    action: { type: 'startWorkflow', workflowType: 'mosaicWorkflow', args: [resolved], taskQueue, workflowId: `mosaic-schedule/${scheduleId}`, ...labels },
  });
}

export async function listSchedules(client: Client): Promise<ScheduleSummary[]> {
  const out: ScheduleSummary[] = [];
  for await (const s of client.schedule.list()) {
    const action = s.action as { type?: string; workflowType?: string } | undefined;
    out.push({
      scheduleId: s.scheduleId,
      cron: typeof s.memo?.['cron'] === 'string' ? [s.memo['cron']] : describeSpec(s.spec ?? {}),
      workflowType: action?.workflowType ?? null,
      paused: s.state.paused,
      nextRuns: s.info.nextActionTimes.slice(0, 3).map((d) => d.toISOString()),
      recentRuns: s.info.recentActions.slice(-3).map((a) => ({ startedAt: a.takenAt.toISOString(), workflowId: 'workflow' in a.action ? a.action.workflow.workflowId : '' })),
    });
  }
  return out;
}

function describeSpec(spec: { calendars?: unknown[]; intervals?: unknown[] }): string[] {
  return [...(spec.calendars ?? []).map((c) => JSON.stringify(c)), ...(spec.intervals ?? []).map((i) => JSON.stringify(i))];
}

export async function deleteSchedule(client: Client, scheduleId: string): Promise<void> {
  try {
    await client.schedule.getHandle(scheduleId).delete();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) throw new Error(`no schedule with id ${JSON.stringify(scheduleId)}`, { cause: err });
    throw err;
  }
}
