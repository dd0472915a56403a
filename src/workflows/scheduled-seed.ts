import { ApplicationFailure, log, ParentClosePolicy, startChild } from '@temporalio/workflow';
import type { SeedRequest, SeedResult } from '../messages/seed-types';
import { seedWorkflow } from './seed';

export interface ScheduledSeedInput {
  request: SeedRequest;
  /** The seed's own id (`seed/<base>-<hash of into>`), the one a seed started by hand takes. */
  workflowId: string;
  scheduleId: string;
}

export type ScheduledSeedResult =
  | { outcome: 'completed'; workflowId: string; result: SeedResult }
  | { outcome: 'skipped'; workflowId: string; message: string };

/**
 * A seed schedule's run: as scheduledMosaicWorkflow does for a mosaic, it starts the seed as a child under the
 * file's own id, so a seed of the same file by hand, by another schedule or by this one's last run is never
 * joined by a second: Temporal refuses the start while that id runs, and this run then ends, skipped.
 */
export async function scheduledSeedWorkflow(input: ScheduledSeedInput): Promise<ScheduledSeedResult> {
  const { workflowId } = input;
  if (typeof workflowId !== 'string' || !workflowId.startsWith('seed/')) {
    throw ApplicationFailure.nonRetryable(
      `scheduled seed: workflowId must be a seed's id, seed/<name> (got ${JSON.stringify(workflowId)})`,
      'ConfigError',
    );
  }
  let child;
  try {
    child = await startChild(seedWorkflow, {
      workflowId,
      args: [input.request],
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    });
  } catch (err) {
    if (!(err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError')) throw err;
    const message = `skipped: ${workflowId} is already running (a seed of ${input.request.into}, by hand or by another schedule)`;
    log.warn(message, { schedule: input.scheduleId, seed: workflowId });
    return { outcome: 'skipped', workflowId, message };
  }
  return { outcome: 'completed', workflowId, result: await child.result() };
}
