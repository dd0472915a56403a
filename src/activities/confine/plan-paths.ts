import type { MosaicPlan } from '../../messages/mosaic-types';
import { SOURCE_NAME, SOURCE_NAME_RULE } from '../../sources/schema';
import { ConfigError } from '../../breaker/config-error';
import { confinePath } from './confine';
import type { WorkerRoots } from './roots';

/**
 * Every folder a plan makes a worker write or read, checked against the output roots. A plan normally comes
 * from the planning activity, which checked it; but anyone who can start a workflow can hand a block or a
 * re-drive a plan of their own, so each activity that acts on one checks it again.
 */
export async function confinePlan(plan: Pick<MosaicPlan, 'output' | 'workDir' | 'journalDir' | 'storeRoot' | 'sourceName'>, roots: WorkerRoots | undefined, subject: string): Promise<void> {
  if (!roots) return;
  if (!SOURCE_NAME.test(plan.sourceName)) throw new ConfigError(subject, [`sourceName: ${SOURCE_NAME_RULE} (got ${JSON.stringify(plan.sourceName)})`]);
  await confinePath(plan.output, roots.outputs, 'output', subject);
  await confinePath(plan.workDir, roots.outputs, 'workDir', subject);
  await confinePath(plan.journalDir, roots.outputs, 'journalDir', subject);
  await confinePath(plan.storeRoot, roots.outputs, 'storeRoot', subject);
}
