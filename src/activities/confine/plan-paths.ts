import type { MosaicPlan } from '../../messages/mosaic-types';
import { checkPlan } from '../../messages/plan-check';
import { confineLocation } from './confine-location';
import type { WorkerRoots } from './roots';

/**
 * A plan as the planner makes it, with every folder it makes a worker write or read under the output roots
 * (folders, or bucket prefixes for `s3://` locations).
 * A plan normally comes from the planning activity, which checked it; but anyone who can start a workflow can
 * hand a block or a re-drive a plan of their own, so each activity that acts on one checks it again, and
 * then uses the real paths it checked.
 */
export async function confinePlan(
  plan: MosaicPlan,
  roots: WorkerRoots | undefined,
  subject: string,
): Promise<MosaicPlan> {
  if (!roots) return plan;
  checkPlan(plan, `${subject}: plan`);
  const at = (p: string, field: string) => confineLocation(p, roots, field, subject);
  return {
    ...plan,
    output: await at(plan.output, 'output'),
    workDir: await at(plan.workDir, 'workDir'),
    ...(plan.journalDir !== undefined ? { journalDir: await at(plan.journalDir, 'journalDir') } : {}),
    storeRoot: await at(plan.storeRoot, 'storeRoot'),
  };
}
