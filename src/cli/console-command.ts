import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { rootsFromEnv } from '../activities/confine/roots';
import { defaultActor } from '../client/breakers';
import { startConsole, type ConsoleServer } from '../console/server';
import { portOption } from './port-option';

/** The console's port unless told otherwise; when it is taken, any free one (the URL printed says which). */
export const DEFAULT_CONSOLE_PORT = 8484;

type WithClient = (fn: (ctx: { client: Client; taskQueue: string }) => Promise<void>, what?: string) => Promise<void>;

/** `tilebreaker console`: the web page of the fleet's breakers and mosaics, until interrupted. */
export function registerConsoleCommand(program: Command, withClient: WithClient): void {
  program
    .command('console')
    .description(
      'serve a web page of the breakers (state, timeline, reporters) and mosaics (progress, a map of each tile) at TEMPORAL_ADDRESS, on 127.0.0.1',
    )
    .option(
      '--port <n>',
      `port on 127.0.0.1 (default ${DEFAULT_CONSOLE_PORT}, or a free one when that is taken; 0: any free one)`,
      portOption('--port'),
    )
    .option(
      '--allow-actions',
      'let the page re-drive mosaics and force open, force closed or reset breakers (recorded with this process as the sender); read-only without it',
    )
    .option('--json', 'print one JSON line with the URL once it serves ({"url", "allowActions"})')
    .action(async (o: { port?: number; allowActions?: boolean; json?: boolean }) => {
      await withClient(async ({ client, taskQueue }) => {
        const server = await serveConsole(client, taskQueue, {
          ...(o.port !== undefined ? { port: o.port } : {}),
          allowActions: !!o.allowActions,
        });
        if (o.json) console.log(JSON.stringify({ url: server.url, allowActions: !!o.allowActions }));
        else
          console.log(
            `tilebreaker console at ${server.url} (${o.allowActions ? 'actions on' : 'read-only'}); Ctrl-C stops it`,
          );
        await untilInterrupted();
        await server.close();
      }, 'the console needs');
    });
}

/**
 * Starts the console for this client, reading outputs under the worker's roots from this environment
 * (TILEBREAKER_OUTPUT_DIR, TILEBREAKER_OUTPUT_BUCKETS). With no port given, DEFAULT_CONSOLE_PORT or, when
 * it is taken, a free one; a port given and taken is an error.
 */
export async function serveConsole(
  client: Client,
  taskQueue: string,
  opts: { port?: number; allowActions?: boolean } = {},
): Promise<ConsoleServer> {
  const base = {
    client,
    taskQueue,
    roots: rootsFromEnv(),
    allowActions: !!opts.allowActions,
    actor: defaultActor().replace(/^cli:/, 'console:'),
  };
  if (opts.port !== undefined) return startConsole({ ...base, port: opts.port });
  try {
    return await startConsole({ ...base, port: DEFAULT_CONSOLE_PORT });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    return startConsole({ ...base, port: 0 });
  }
}

/** Resolves on Ctrl-C or SIGTERM. */
export function untilInterrupted(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
}
