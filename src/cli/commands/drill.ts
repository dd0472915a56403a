import type { Command } from 'commander';
import type { Runners } from '../runners';

/** `tilebreaker drill`: a breaker configuration rehearsed on durable timers (src/cli/run-drill.ts runs it). */
export function registerDrillCommand(program: Command, run: Runners): void {
  program
    .command('drill')
    .description('rehearse a breaker configuration against a scripted sequence of outcomes, on durable timers')
    .argument(
      '[file]',
      'JSON drill input ({ config, steps: [{ atMs, event }], settleMs }); default: the built-in demo outage',
    )
    .option('--json', 'print the result as JSON')
    .action(async (file: string | undefined, opts: { json?: boolean }) => {
      const { printDrill, readDrillFile, runDrill } = await import('../run-drill.js');
      const input = file ? readDrillFile(file) : (await import('../../client/demo-drill.js')).demoDrill();
      await run.withTemporal(async ({ client, taskQueue }) =>
        printDrill(await runDrill(client, taskQueue, input), !!opts.json),
      );
    });
}
