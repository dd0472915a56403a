import type { Command } from 'commander';
import { deleteSchedule } from '../../client/schedules';
import type { WithClient } from '../runners';

/** `schedule delete`: what its runs started goes on. */
export function registerScheduleDelete(schedule: Command, withClient: WithClient): void {
  schedule
    .command('delete')
    .description('delete a schedule, of mosaics or of a seed (running mosaics or seeds it started go on)')
    .argument('<scheduleId>')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        await deleteSchedule(client, id);
        console.log(o.json ? JSON.stringify({ scheduleId: id, deleted: true }) : `deleted schedule ${id}`);
      });
    });
}
