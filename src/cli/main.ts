#!/usr/bin/env node
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command } from 'commander';
import { connectionConfigFromEnv } from '../client/connection-config';
import { demoDrill } from '../client/demo-drill';
import { startEmbeddedServer, type EmbeddedServer } from '../client/embedded-server';
import { connectClient, connectWorker } from '../client/temporal';
import { createWorker } from '../client/worker';
import { printDrill, readDrillFile, runDrill } from './run-drill';
import { tileCommand, type TileCommandOptions } from './tile-command';

// The SDK logs every worker state change and the workflow bundle at INFO; a CLI user wants warnings.
Runtime.install({ logger: new DefaultLogger((process.env.TILEBREAKER_LOG_LEVEL as 'INFO' | undefined) ?? 'WARN') });

const program = new Command('tilebreaker')
  .description('Nightly map mosaics from WMS / WMTS / XYZ tile services behind fleet-wide circuit breakers, on Temporal')
  .showHelpAfterError();

program
  .command('worker')
  .description('run a tilebreaker worker against TEMPORAL_ADDRESS (task queue TILEBREAKER_TASK_QUEUE, default "tilebreaker")')
  .action(async () => {
    const config = connectionConfigFromEnv();
    if (!config.address) throw new Error('worker: TEMPORAL_ADDRESS is not set; name the Temporal frontend, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233');
    const connection = await connectWorker({ ...config, address: config.address });
    const { client, connection: clientConnection } = await connectClient({ ...config, address: config.address });
    const worker = await createWorker({ connection, client, namespace: config.namespace, taskQueue: config.taskQueue });
    console.error(`tilebreaker worker: ${config.address} namespace ${config.namespace} task queue ${config.taskQueue}`);
    // Worker.run resolves after SIGINT/SIGTERM once in-flight tasks drain.
    await worker.run();
    await connection.close();
    await clientConnection.close();
  });

program
  .command('drill')
  .description('rehearse a breaker configuration against a scripted sequence of outcomes, on durable timers')
  .argument('[file]', 'JSON drill input ({ config, steps: [{ atMs, event }], settleMs }); default: the built-in demo outage')
  .option('--json', 'print the result as JSON')
  .action(async (file: string | undefined, opts: { json?: boolean }) => {
    const input = file ? readDrillFile(file) : demoDrill();
    await withTemporal(async ({ client, taskQueue }) => printDrill(await runDrill(client, taskQueue, input), !!opts.json));
  });

program
  .command('tile')
  .description('fetch one tile through the pipeline\'s fetch path and print one JSON object (exit 0 when it is a good tile)')
  .argument('<zxy>', 'the tile as Z/X/Y (XYZ rows, from the top)')
  .requiredOption('--source <file>', 'sources file (YAML or JSON)')
  .option('--name <source>', 'which source in the file (default: its only one)')
  .option('--breaker', 'go through the fleet-wide breaker at TEMPORAL_ADDRESS')
  .option('--attempts <n>', 'attempts, with the pipeline\'s backoff between them', '1')
  .option('--out <dir>', 'keep the tile in this tile store folder')
  .action(async (zxy: string, opts: TileCommandOptions) => {
    process.exitCode = await tileCommand(zxy, opts);
  });

program
  .command('demo')
  .description('the main job (npm start): for now, a breaker drill on an embedded Temporal dev server')
  .action(async () => {
    console.log('tilebreaker: the nightly mosaic main job is not built yet (issue 5).');
    console.log('This run starts a real Temporal dev server and worker and rehearses a scripted outage with the breaker policy.\n');
    await withTemporal(async ({ client, taskQueue, address }) => {
      console.log(`Temporal at ${address}; running the demo drill (about 10 s of durable timers)...`);
      printDrill(await runDrill(client, taskQueue, demoDrill()), false);
    });
  });

/**
 * Runs `fn` with a client and a worker polling the task queue: against TEMPORAL_ADDRESS when set,
 * otherwise against an embedded dev server that is stopped afterwards.
 */
async function withTemporal(fn: (ctx: { client: import('@temporalio/client').Client; taskQueue: string; address: string }) => Promise<void>): Promise<void> {
  const config = connectionConfigFromEnv();
  let server: EmbeddedServer | undefined;
  if (!config.address) {
    console.error('tilebreaker: TEMPORAL_ADDRESS is unset; starting a local Temporal dev server (state in .temporal/dev-server.sqlite)');
    server = await startEmbeddedServer();
  }
  const address = config.address ?? server!.address;
  const namespace = server ? server.namespace : config.namespace;
  try {
    const { client, connection } = await connectClient({ ...config, address, namespace });
    const workerConnection = await connectWorker({ ...config, address, namespace });
    const worker = await createWorker({ connection: workerConnection, client, namespace, taskQueue: config.taskQueue });
    try {
      await worker.runUntil(fn({ client, taskQueue: config.taskQueue, address }));
    } finally {
      await connection.close();
      await workerConnection.close();
    }
  } finally {
    await server?.stop();
  }
}

program.parseAsync().catch((err: unknown) => {
  console.error(`tilebreaker: ${err instanceof Error ? err.message : String(err)}`);
  // 2: the command could not run (bad input, unreachable server); 1 is kept for "ran, and the answer is no".
  process.exit(2);
});
