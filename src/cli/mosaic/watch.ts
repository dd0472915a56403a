import type { Command } from 'commander';
import { resolveMosaicId } from '../../client/mosaic-names';
import type { WithClient } from '../runners';
import { showMosaicProgress } from './progress';
import { finish } from './result';

/** `mosaic watch`: a live progress bar until the mosaic ends, then its result. */
export function registerMosaicWatch(mosaic: Command, withClient: WithClient): void {
  mosaic
    .command('watch')
    .description('a live progress bar (counts by status, breaker states) until the mosaic ends')
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print the final state as JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        process.exitCode = finish(await showMosaicProgress(client, await resolveMosaicId(client, ref)), !!o.json);
      });
    });
}
