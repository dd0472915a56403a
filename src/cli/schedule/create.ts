import type { Command } from 'commander';
import { createMosaicSchedule } from '../../client/schedules';
import { checkMosaicName, defaultMosaicName } from '../../messages/mosaic-names';
import { checkScheduleOverlap, SCHEDULE_OVERLAPS } from '../../messages/scheduled-mosaic';
import { requestFromOptions } from '../mosaic/request';
import { preflight } from '../preflight';
import type { WithClient } from '../runners';

interface CreateOptions {
  cron: string;
  request: string;
  timezone?: string;
  name?: string;
  overlap?: string;
  sourcesOnWorker?: boolean;
  json?: boolean;
}

/** `schedule create`: a Temporal Schedule that starts a mosaic on a cron spec. */
export function registerScheduleCreate(schedule: Command, withClient: WithClient): void {
  schedule
    .command('create')
    .description('create a schedule that starts a mosaic on a cron spec')
    .argument('<scheduleId>')
    .requiredOption('--cron <expr>', 'cron expression, e.g. "0 2 * * *" for 02:00 every night')
    .requiredOption('--request <file>', 'the mosaic request (YAML or JSON)')
    .option('--timezone <tz>', 'IANA time zone for the cron spec (default UTC)')
    .option('--name <name>', "the mosaics' name (default: the output's base name)")
    .option(
      '--overlap <policy>',
      `when the output is already being built (by this schedule, another, by hand or a re-drive): ${SCHEDULE_OVERLAPS.join(' | ')} (default skip: the run ends, naming the running one; buffer-*: it waits for it; allow-all: it fails)`,
    )
    .option(
      '--sources-on-worker',
      "the request's sourcesFile exists only on the workers (its path as they see it, or relative to their first sources root): not read here, the workers check it each night",
    )
    .option('--json', 'print JSON')
    .action((id: string, o: CreateOptions) => createAction(id, o, withClient));
}

async function createAction(id: string, o: CreateOptions, withClient: WithClient): Promise<void> {
  if (o.name !== undefined) checkMosaicName(o.name, '--name');
  const overlap = checkScheduleOverlap(o.overlap ?? 'skip', '--overlap');
  const request = requestFromOptions({ request: o.request });
  // A request that fails tonight would fail every night: refused now.
  await preflight(request, {
    sourcesOnWorker: !!o.sourcesOnWorker,
    sourcesFrom: `sourcesFile in --request ${o.request}`,
  });
  await withClient(async ({ client, taskQueue }) => {
    await createMosaicSchedule(client, taskQueue, id, o.cron, request, o.timezone, {
      overlap,
      ...(o.name !== undefined ? { name: o.name } : {}),
    });
    console.log(
      o.json
        ? JSON.stringify({
            scheduleId: id,
            name: o.name ?? defaultMosaicName(request.output),
            cron: o.cron,
            timezone: o.timezone ?? 'UTC',
            overlap,
          })
        : `created schedule ${id}: "${o.cron}"${o.timezone ? ` (${o.timezone})` : ' (UTC)'}, overlap ${overlap}`,
    );
  });
}
