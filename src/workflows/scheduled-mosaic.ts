import {
  ApplicationFailure,
  log,
  ParentClosePolicy,
  proxyActivities,
  startChild,
  upsertMemo,
} from '@temporalio/workflow';
import type { ScheduledMosaicActivities } from '../messages/activities';
import { startLabels } from '../messages/mosaic-labels';
import {
  checkScheduledMosaicInput,
  type ScheduledMosaicInput,
  type ScheduledMosaicMemo,
  type ScheduledMosaicResult,
} from '../messages/scheduled-mosaic';
import { mosaicWorkflow } from './mosaic';

const { awaitWorkflowClosed } = proxyActivities<ScheduledMosaicActivities>({
  startToCloseTimeout: '40m',
  heartbeatTimeout: '1m',
});

/** One stretch of waiting for the run that holds the output; the loop asks again after it. */
const WAIT_STRETCH_MS = 30 * 60_000;

/**
 * A schedule's run. A Temporal Schedule gives each run an id of its own (`mosaic-schedule/<id>-<time>`) and
 * cannot give a fixed one, so this thin launcher starts the real mosaic as a child under the output's id,
 * `mosaic/<base>-<hash>`, the id a start by hand and a re-drive use too. Temporal lets one run hold an id at a
 * time and refuses the start of a second atomically; the refusal is recorded in this history, so what the
 * launcher does then (the overlap policy) replays exactly. A lease of our own (a file, an activity) would need
 * its own expiry and could outlive a dead worker; the id is released exactly when the run holding it closes.
 * The launcher waits for its mosaic, so the schedule's own overlap policy sees it running, and a launcher
 * that is terminated asks its mosaic to cancel, which still writes a partial manifest.
 */
export async function scheduledMosaicWorkflow(input: ScheduledMosaicInput): Promise<ScheduledMosaicResult> {
  try {
    checkScheduledMosaicInput(input);
  } catch (err) {
    throw ApplicationFailure.nonRetryable((err as Error).message, 'ConfigError');
  }
  const { workflowId, overlap, label } = input;
  const note = (m: ScheduledMosaicMemo) => upsertMemo({ ...m });
  const labels = startLabels(label, input.attributes);
  for (;;) {
    let child;
    try {
      // The same memo and search attributes as a start by hand: mosaic list, status, watch and cancel find it by name.
      child = await startChild(mosaicWorkflow, {
        workflowId,
        args: [input.request],
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        ...labels,
        memo: { ...labels.memo, schedule: input.scheduleId },
      });
    } catch (err) {
      if (!idTaken(err)) throw err;
      const busy = `${workflowId} is already running (a mosaic or re-drive of ${label.output}, by hand or by another schedule)`;
      if (overlap === 'skip') {
        const message = `skipped (overlap skip): ${busy}`;
        log.warn(message, { schedule: input.scheduleId, mosaic: workflowId });
        note({ state: 'skipped', message });
        return { outcome: 'skipped', workflowId, message };
      }
      if (overlap === 'allow-all') {
        throw ApplicationFailure.nonRetryable(
          `not started (overlap allow-all, but one output runs once at a time): ${busy}`,
          'MosaicAlreadyRunning',
        );
      }
      note({ state: 'waiting', message: `waiting (overlap ${overlap}) until ${workflowId} ends: ${busy}` });
      await awaitWorkflowClosed({ workflowId, forMs: WAIT_STRETCH_MS });
      continue;
    }
    note({ state: 'running', message: `started ${workflowId}` });
    const result = await child.result();
    return { outcome: 'completed', workflowId, message: `${workflowId} finished`, result };
  }
}

/** A child start refused because a run holds the id (the SDK's error class is not exported to workflow code, its name is). */
function idTaken(err: unknown): boolean {
  return err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError';
}
