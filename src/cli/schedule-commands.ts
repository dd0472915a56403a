import type { Command } from 'commander';
import type { WithClient } from './runners';
import { registerScheduleCreate } from './schedule/create';
import { registerScheduleDelete } from './schedule/delete';
import { registerScheduleList } from './schedule/list';

/**
 * `tilebreaker schedule create | list | delete`: nightly mosaics as Temporal Schedules, against TEMPORAL_ADDRESS
 * (`seed --schedule` makes a seed's). Each subcommand is defined, with its action, in src/cli/schedule/.
 */
export function registerScheduleCommands(program: Command, withClient: WithClient): void {
  const schedule = program
    .command('schedule')
    .description(
      'nightly mosaics as Temporal Schedules (one run of an output at a time; overlap policy: skip by default)',
    );
  registerScheduleCreate(schedule, withClient);
  registerScheduleList(schedule, withClient);
  registerScheduleDelete(schedule, withClient);
}
