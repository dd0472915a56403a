import { isMosaicName } from './mosaic-names';
import type { MosaicStartLabel } from './mosaic-labels';
import type { MosaicRequest, MosaicResult } from './mosaic-types';

/**
 * What a schedule's run does when its output's mosaic id is taken (a run by hand, a re-drive, another
 * schedule's run): `skip` ends it at once, saying which run holds the output; `buffer-one` and `buffer-all`
 * wait for that run to end, then start; `allow-all` fails it, naming the run. The schedule itself gets the
 * Temporal overlap policy of the same name for its own runs. cancel-other and terminate-other are not offered:
 * they would stop a mosaic mid-fetch that a person or another schedule started.
 */
export const SCHEDULE_OVERLAPS = ['skip', 'buffer-one', 'buffer-all', 'allow-all'] as const;
export type ScheduleOverlap = (typeof SCHEDULE_OVERLAPS)[number];

export function checkScheduleOverlap(value: string, field = 'overlap'): ScheduleOverlap {
  if (!(SCHEDULE_OVERLAPS as readonly string[]).includes(value))
    throw new Error(`${field}: must be one of ${SCHEDULE_OVERLAPS.join(', ')} (got ${JSON.stringify(value)})`);
  return value as ScheduleOverlap;
}

/** The arguments a schedule gives each of its runs (scheduledMosaicWorkflow). */
export interface ScheduledMosaicInput {
  /** The request, its paths resolved by the client that created the schedule. */
  request: MosaicRequest;
  /** The output's mosaic id, `mosaic/<base>-<hash>`: computed by the client (workflow code cannot hash). */
  workflowId: string;
  overlap: ScheduleOverlap;
  scheduleId: string;
  /** The mosaic's labels, and whether the namespace had the Mosaic* search attributes when the schedule was made. */
  label: MosaicStartLabel;
  attributes: boolean;
}

export interface ScheduledMosaicResult {
  /** completed: this run started the mosaic and it finished (see result); skipped: another run held the output. */
  outcome: 'completed' | 'skipped';
  /** The mosaic this run started, or the one it found running. */
  workflowId: string;
  message: string;
  result?: MosaicResult;
}

/** The memo a schedule's run keeps: which schedule, what it is doing, and why. */
export interface ScheduledMosaicMemo {
  name?: string;
  output?: string;
  schedule?: string;
  state?: 'starting' | 'waiting' | 'running' | 'skipped';
  message?: string;
}

const MOSAIC_ID = /^mosaic\/[A-Za-z0-9][A-Za-z0-9._-]{0,63}-[0-9a-f]{8}$/;

/** Anyone who can start workflows can start this one: every field it acts on is checked, naming the field and the value. */
export function checkScheduledMosaicInput(input: ScheduledMosaicInput): ScheduledMosaicInput {
  const bad = (field: string, what: string, value: unknown) =>
    new Error(`scheduled mosaic: ${field}: ${what} (got ${JSON.stringify(value)})`);
  if (typeof input !== 'object' || input === null) throw bad('input', 'must be an object', input);
  if (typeof input.workflowId !== 'string' || !MOSAIC_ID.test(input.workflowId))
    throw bad('workflowId', 'must be an output mosaic id, mosaic/<name>-<8 hex digits>', input.workflowId);
  checkScheduleOverlap(String(input.overlap), 'scheduled mosaic: overlap');
  if (typeof input.scheduleId !== 'string' || input.scheduleId.length === 0 || input.scheduleId.length > 200)
    throw bad('scheduleId', 'must be 1-200 characters', input.scheduleId);
  if (typeof input.request !== 'object' || input.request === null || typeof input.request.output !== 'string')
    throw bad('request.output', 'must be a path', input.request?.output);
  const l = input.label;
  if (typeof l !== 'object' || l === null || !isMosaicName(String(l.name)))
    throw bad('label.name', 'must be a mosaic name', l?.name);
  if (typeof l.source !== 'string' || l.source.length > 200)
    throw bad('label.source', 'must be at most 200 characters', l.source);
  if (l.zoom !== undefined && !Number.isInteger(l.zoom)) throw bad('label.zoom', 'must be a whole number', l.zoom);
  if (typeof l.output !== 'string') throw bad('label.output', 'must be a path', l.output);
  if (typeof input.attributes !== 'boolean') throw bad('attributes', 'must be true or false', input.attributes);
  return input;
}
