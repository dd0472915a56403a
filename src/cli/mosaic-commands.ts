import type { Command } from 'commander';
import { registerMosaicCancel } from './mosaic/cancel';
import { registerMosaicList } from './mosaic/list';
import { registerMosaicRedrive } from './mosaic/redrive';
import { registerMosaicStart } from './mosaic/start';
import { registerMosaicStatus } from './mosaic/status';
import { registerMosaicWatch } from './mosaic/watch';
import type { ClientRunners } from './runners';

/**
 * `tilebreaker mosaic start | status | watch | cancel | list | redrive`. `withLocal` runs a followed `start`
 * (--wait, --watch) on an embedded server with a worker in this process when TEMPORAL_ADDRESS is unset; the
 * others act on the fleet's server. Each subcommand is defined, with its action, in src/cli/mosaic/.
 */
export function registerMosaicCommands(program: Command, runners: ClientRunners): void {
  const mosaic = program
    .command('mosaic')
    .description(
      'build, follow and re-drive mosaics (exit codes: 0 every tile ok, 3 done with gaps, 4 configuration error, 1 failed or cancelled, 2 could not run)',
    );
  registerMosaicStart(mosaic, runners);
  registerMosaicStatus(mosaic, runners.withClient);
  registerMosaicWatch(mosaic, runners.withClient);
  registerMosaicCancel(mosaic, runners.withClient);
  registerMosaicList(mosaic, runners.withClient);
  registerMosaicRedrive(mosaic, runners.withClient);
}
