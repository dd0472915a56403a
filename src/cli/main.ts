#!/usr/bin/env node
// This module loads only what every command needs to be parsed (commander and a few constants): each command
// imports what it runs with `await import()` when it runs, so an operator's `tilebreaker breaker open` in an
// emergency does not first load the worker, the activities (sharp, undici, the S3 client) or the mosaic
// request's validation (test/cli/breaker-commands.test.ts checks what breaker commands load).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { packageRoot } from '../client/local-server';
import { registerDemoCommand } from './commands/demo';
import { registerDrillCommand } from './commands/drill';
import { registerSourcesCommands } from './commands/sources';
import { registerTileCommand } from './commands/tile';
import { registerWorkerCommand } from './commands/worker';
import { errorBody, printError, usageBody, wantsJson } from './errors';
import { LineLogger, logSettings } from './logging';
import { runners, type WithClient } from './runners';

/**
 * Under --json (every command takes it), an error is one JSON object on stdout, `{ "error": { message, kind,
 * exitCode, field?, ... } }` (src/cli/errors.ts, docs/cli.md), instead of a line on stderr; exit codes are the same.
 */
let json = wantsJson(process.argv.slice(2));

// One JSON line per entry, through the runtime: breaker transitions and fail-opens (INFO and WARN) show at a
// worker's default level; the SDK's own INFO chatter (worker state changes, bundling) does not.
let logger: LineLogger;
try {
  logger = new LineLogger(logSettings(process.env, 'WARN'));
} catch (err) {
  printError(errorBody(err, 2), json);
  process.exit(2);
}

const program = new Command('tilebreaker')
  .description(
    'Nightly map mosaics from WMS / WMTS / XYZ tile services behind fleet-wide circuit breakers, on Temporal',
  )
  .version(packageVersion(), '--version', 'print the version')
  .showHelpAfterError()
  // Under --json a usage error is the JSON object exitOverride prints: commander's own text (and the help after it) stays off stderr.
  .configureOutput(json ? { outputError: () => undefined, writeErr: () => undefined } : {})
  // A usage error exits 2, as every failure to run does here (commander's default, 1, means "ran, and the
  // answer is no" in this CLI); help exits 0. Subcommands inherit this.
  .exitOverride((err) => {
    if (err.exitCode !== 0 && json) printError(usageBody(err), true);
    process.exit(err.exitCode === 0 ? 0 : 2);
  })
  // Once a command line has parsed, its own --json says it: `--reason --json` is a reason, not the flag.
  .hook('preAction', (_program, command) => {
    json = command.opts<{ json?: unknown }>().json === true;
  });

const run = runners(logger);

// Registered at start, in this order (help lists them so): their modules load only commander and constants.
registerWorkerCommand(program, run);
registerDrillCommand(program, run);
registerTileCommand(program);
registerSourcesCommands(program);
registerDemoCommand(program, run);

/**
 * The command groups, registered from their modules only when needed: a line that names a group loads that
 * group alone; `--help`, a bare `tilebreaker` or an unknown command loads them all (help lists every command).
 * Registered in this order either way, so help reads the same.
 */
const GROUPS: Record<string, () => Promise<void>> = {
  breaker: async () => {
    const { registerBreakerCommands } = await import('./breaker-commands.js');
    registerBreakerCommands(program, (fn) =>
      run.withClient(({ client, taskQueue }) => fn(client, taskQueue), 'breaker commands need'),
    );
  },
  mosaic: async () => {
    const [{ registerMosaicCommands }, { registerScheduleCommands }, { connectionConfigFromEnv }] = await Promise.all([
      import('./mosaic-commands.js'),
      import('./schedule-commands.js'),
      import('../client/connection-config.js'),
    ]);
    const withClient: WithClient = (fn) => run.withClient(fn);
    // Without TEMPORAL_ADDRESS, `mosaic start --wait` (and `seed`) runs on an embedded server with a worker in this process.
    const withLocal: WithClient = (fn) =>
      connectionConfigFromEnv().address ? run.withClient(fn) : run.withTemporal(fn);
    registerMosaicCommands(program, { withClient, withLocal });
    registerScheduleCommands(program, withClient);
    const { registerSeedCommand } = await import('./seed-commands.js');
    registerSeedCommand(program, { withLocal, withClient });
  },
  console: async () => {
    const { registerConsoleCommand } = await import('./console-command.js');
    registerConsoleCommand(program, run.withClient);
  },
};
/** `schedule` and `seed` are registered with `mosaic`. */
const GROUP_OF: Record<string, keyof typeof GROUPS> = {
  breaker: 'breaker',
  mosaic: 'mosaic',
  schedule: 'mosaic',
  seed: 'mosaic',
  console: 'console',
};

/** The command a command line names: its first operand (the top level takes no option with a value), or after `help`, the next. */
function commandNamed(args: readonly string[]): string | undefined {
  const operands = args.filter((a) => !a.startsWith('-'));
  return operands[0] === 'help' ? operands[1] : operands[0];
}

async function main(): Promise<void> {
  const named = commandNamed(process.argv.slice(2));
  const group = named !== undefined ? GROUP_OF[named] : undefined;
  const known = named !== undefined && program.commands.some((c) => c.name() === named);
  for (const name of Object.keys(GROUPS)) {
    if (group === name || (group === undefined && !known)) await GROUPS[name]!();
  }
  await program.parseAsync();
}

main().catch((err: unknown) => {
  // 2: the command could not run (bad input, unreachable server); 1 is kept for "ran, and the answer is no".
  printError(errorBody(err, 2), json);
  process.exit(2);
});

/** tilebreaker's version, from its package.json. */
function packageVersion(): string {
  try {
    return (
      (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version ??
      'unknown'
    );
  } catch {
    return 'unknown';
  }
}
