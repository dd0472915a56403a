import type { Command } from 'commander';
import { listSchedules } from '../../client/schedules';
import { listJson } from '../format';
import type { WithClient } from '../runners';

/** `schedule list`: the schedules, of mosaics and of seeds, with their next runs. */
export function registerScheduleList(schedule: Command, withClient: WithClient): void {
  schedule
    .command('list')
    .description('list schedules with their next runs')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const all = await listSchedules(client);
        if (o.json) console.log(listJson(all));
        else if (all.length === 0) console.log('no schedules');
        else
          for (const s of all) {
            // Made by an earlier version: its runs start mosaics under ids of their own, beside other runs of the output.
            const old =
              s.workflowType === 'mosaicWorkflow'
                ? '  (made before one run per output: delete and create it again)'
                : '';
            const seed = s.workflowType === 'scheduledSeedWorkflow' ? '  (seed)' : '';
            console.log(
              `${s.scheduleId}  ${s.cron.join(' ')} (${s.timezone})  ${s.paused ? 'paused' : 'active'}  next ${s.nextRuns[0] ?? '-'}${seed}${old}`,
            );
          }
      });
    });
}
