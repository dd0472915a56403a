import { ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { parseMosaicRequest } from '../messages/mosaic-request';
import type { MosaicRequest } from '../messages/mosaic-types';
import { checkMosaicName, defaultMosaicName } from '../messages/mosaic-names';
import {
  checkScheduleOverlap,
  type ScheduledMosaicInput,
  type ScheduledMosaicMemo,
  type ScheduleOverlap,
} from '../messages/scheduled-mosaic';
import { mosaicAttributesRegistered, mosaicWorkflowId } from './mosaic-names';
import { resolveRequestPaths } from './mosaics';
import { prepareSeed, seedWorkflowId } from './seeds';
import type { ScheduledSeedInput } from '../workflows/scheduled-seed';
import type { SeedRequest } from '../messages/seed-types';

export interface ScheduleSummary {
  scheduleId: string;
  cron: string[];
  /** The IANA time zone its cron spec is read in (UTC unless given). */
  timezone: string;
  /** scheduledMosaicWorkflow; mosaicWorkflow for a schedule made before one run per output. */
  workflowType: string | null;
  /** What its runs do when the output is taken (schedules made before one run per output: null). */
  overlap: string | null;
  paused: boolean;
  nextRuns: string[];
  recentRuns: { startedAt: string; workflowId: string }[];
}

const TEMPORAL_OVERLAP: Record<ScheduleOverlap, ScheduleOverlapPolicy> = {
  skip: ScheduleOverlapPolicy.SKIP,
  'buffer-one': ScheduleOverlapPolicy.BUFFER_ONE,
  'buffer-all': ScheduleOverlapPolicy.BUFFER_ALL,
  'allow-all': ScheduleOverlapPolicy.ALLOW_ALL,
};

/**
 * A nightly mosaic as a Temporal Schedule. Each run is a scheduledMosaicWorkflow that starts the mosaic under
 * the output's id (`mosaic/<base>-<hash>`, as a start by hand and a re-drive do), so one output never runs
 * twice at once, whoever started it. `overlap` (default skip: a long outage under `wait` is not joined by the
 * next night's run) is the schedule's Temporal overlap policy for its own runs, and what a run does when it
 * finds the output's id taken by another: skip ends it, buffer-* wait for that run to end, allow-all fails it.
 */
export async function createMosaicSchedule(
  client: Client,
  taskQueue: string,
  scheduleId: string,
  cron: string,
  request: MosaicRequest,
  timezone?: string,
  opts: { name?: string; overlap?: string } = {},
): Promise<void> {
  const overlap = checkScheduleOverlap(opts.overlap ?? 'skip', '--overlap');
  const resolved = resolveRequestPaths(request);
  parseMosaicRequest(resolved);
  // Each night's mosaic carries the name, as one started by hand does (`mosaic status NAME`, `mosaic list`).
  const name = opts.name !== undefined ? checkMosaicName(opts.name, '--name') : defaultMosaicName(resolved.output);
  const label = { name, source: resolved.sourceName ?? 'inline', zoom: resolved.zoom, output: resolved.output };
  const input: ScheduledMosaicInput = {
    request: resolved,
    workflowId: mosaicWorkflowId(resolved.output),
    overlap,
    scheduleId,
    label,
    attributes: await mosaicAttributesRegistered(client),
  };
  const runMemo: ScheduledMosaicMemo = { name, output: resolved.output, schedule: scheduleId, state: 'starting' };
  await client.schedule.create({
    scheduleId,
    spec: { cronExpressions: [cron], ...(timezone ? { timezone } : {}) },
    // The server turns cron into calendar specs; keep the words the user wrote for `schedule list`.
    memo: { cron, timezone: timezone ?? 'UTC', output: resolved.output, name, overlap },
    policies: { overlap: TEMPORAL_OVERLAP[overlap], catchupWindow: '1h' },
    // The launcher carries no Mosaic* search attributes (it is not a mosaic): its mosaic does.
    action: {
      type: 'startWorkflow',
      workflowType: 'scheduledMosaicWorkflow',
      args: [input],
      taskQueue,
      workflowId: `mosaic-schedule/${scheduleId}`,
      memo: { ...runMemo },
    },
  });
}

/**
 * A recurring seed as a Temporal Schedule. Each run is a scheduledSeedWorkflow (`seed-schedule/<id>-<time>`)
 * that starts the seed under the file's own id (`seed/<base>-<hash>`, as `tilebreaker seed` does), so one file
 * is never seeded twice at once, whoever started the other; such a run ends skipped. The schedule's own
 * overlap policy is skip too. Ages and durations in the request (`deadline: 6h`, `refreshBefore: 7d`) count
 * from each run's start.
 */
export async function createSeedSchedule(
  client: Client,
  taskQueue: string,
  scheduleId: string,
  cron: string,
  request: SeedRequest,
  timezone?: string,
): Promise<void> {
  const resolved = prepareSeed(request);
  const input: ScheduledSeedInput = { request: resolved, workflowId: seedWorkflowId(resolved.into), scheduleId };
  await client.schedule.create({
    scheduleId,
    spec: { cronExpressions: [cron], ...(timezone ? { timezone } : {}) },
    memo: { cron, timezone: timezone ?? 'UTC', output: resolved.into, overlap: 'skip' },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1h' },
    action: {
      type: 'startWorkflow',
      workflowType: 'scheduledSeedWorkflow',
      args: [input],
      taskQueue,
      workflowId: `seed-schedule/${scheduleId}`,
    },
  });
}

export async function listSchedules(client: Client): Promise<ScheduleSummary[]> {
  const out: ScheduleSummary[] = [];
  for await (const s of client.schedule.list()) {
    const action = s.action as { type?: string; workflowType?: string } | undefined;
    out.push({
      scheduleId: s.scheduleId,
      cron: typeof s.memo?.['cron'] === 'string' ? [s.memo['cron']] : describeSpec(s.spec ?? {}),
      timezone: await timezoneOf(client, s),
      workflowType: action?.workflowType ?? null,
      overlap: typeof s.memo?.['overlap'] === 'string' ? s.memo['overlap'] : null,
      paused: s.state.paused,
      nextRuns: s.info.nextActionTimes.slice(0, 3).map((d) => d.toISOString()),
      recentRuns: s.info.recentActions.slice(-3).map((a) => ({
        startedAt: a.takenAt.toISOString(),
        workflowId: 'workflow' in a.action ? a.action.workflow.workflowId : '',
      })),
    });
  }
  return out;
}

/** A schedule's time zone: from its memo (schedules made since it is kept there), else from its full description. */
async function timezoneOf(
  client: Client,
  s: { scheduleId: string; memo?: Record<string, unknown> | undefined },
): Promise<string> {
  const kept = s.memo?.['timezone'];
  if (typeof kept === 'string' && kept) return kept;
  // The list's own spec may leave the zone out: the schedule's description has it.
  const described = await client.schedule.getHandle(s.scheduleId).describe();
  return described.spec.timezone ?? 'UTC';
}

function describeSpec(spec: { calendars?: unknown[]; intervals?: unknown[] }): string[] {
  return [
    ...(spec.calendars ?? []).map((c) => JSON.stringify(c)),
    ...(spec.intervals ?? []).map((i) => JSON.stringify(i)),
  ];
}

export async function deleteSchedule(client: Client, scheduleId: string): Promise<void> {
  try {
    await client.schedule.getHandle(scheduleId).delete();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError)
      throw new Error(`no schedule with id ${JSON.stringify(scheduleId)}`, { cause: err });
    throw err;
  }
}
