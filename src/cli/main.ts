#!/usr/bin/env node
// This module loads only what every command needs to be parsed (commander and a few constants): each command
// imports what it runs with `await import()` when it runs, so an operator's `tilebreaker breaker open` in an
// emergency does not first load the worker, the activities (sharp, undici, the S3 client) or the mosaic
// request's validation (test/cli/breaker-commands.test.ts checks what breaker commands load).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import type { Client } from '@temporalio/client';
import { OUTPUT_BUCKETS_ENV, OUTPUT_DIR_ENV, SOURCES_DIR_ENV } from '../activities/confine/roots';
import { DEFAULT_FETCH_BATCHES, FETCH_BATCHES_ENV } from '../client/fetch-batches';
import { packageRoot } from '../client/local-server';
import {
  bindAddressOf,
  freePort,
  METRICS_ADDR_ENV,
  metricsUrl,
  parseMetricsAddr,
  portFree,
  prometheusTelemetry,
} from '../client/telemetry';
import { BUILD_ID_ENV, DEPLOYMENT_NAME_ENV, PROMOTE_ENV, VERSIONING_ENV } from '../client/versioning';
import type { CreateWorkerOptions } from '../client/worker';
import type { WithClient } from './mosaic-commands';
import { errorBody, printError, usageBody, wantsJson } from './errors';
import { LineLogger, logSettings } from './logging';
import { portOption } from './port-option';
import type { TileCommandOptions } from './tile-command';
import type { WorkerCommandOptions } from './worker-command';

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

/**
 * Installs the SDK's runtime (once per process: each command calls this at most once), before the first worker connection: with a Prometheus endpoint when
 * the command serves metrics (`--metrics-addr`, else TILEBREAKER_METRICS_ADDR; off unless set). Only commands
 * that run a worker install it (worker, demo, drill, a local `mosaic start --wait`): a client needs none, so
 * the others never load @temporalio/worker. Returns the metrics URL, or null.
 *
 * `anyPortIfTaken` (the demo's): when the port is taken, serve on a free port of the same IP instead, and say
 * so on stderr, rather than stop (`npm start` names 127.0.0.1:9464; a second demo, or anything else there,
 * would stop it). A worker's endpoint is what its scraper is configured for: a taken port stops it, naming it.
 */
async function installRuntime(metrics: {
  flag: string | undefined;
  fromEnv: boolean;
  anyPortIfTaken?: boolean;
}): Promise<string | null> {
  const env = metrics.fromEnv ? process.env[METRICS_ADDR_ENV] || undefined : undefined;
  const what = metrics.flag !== undefined ? '--metrics-addr' : METRICS_ADDR_ENV;
  const value = metrics.flag ?? env;
  let addr = value !== undefined ? parseMetricsAddr(value, what) : null;
  if (addr && metrics.anyPortIfTaken && !(await portFree(addr.host, addr.port))) {
    const bindAddress = bindAddressOf(addr.host, await freePort(addr.host));
    console.error(
      `tilebreaker: ${what} ${addr.bindAddress} is taken (something else listens there); serving metrics at ${metricsUrl(bindAddress)} instead`,
    );
    addr = { ...addr, bindAddress };
  }
  const { Runtime } = await import('@temporalio/worker');
  try {
    Runtime.install({ logger, ...(addr ? { telemetryOptions: prometheusTelemetry(addr.bindAddress) } : {}) });
  } catch (err) {
    // The one failure here in practice: the port is taken ("Address already in use").
    throw new Error(`${what} ${value ?? ''}: ${(err as Error).message}`, { cause: err });
  }
  return addr ? metricsUrl(addr.bindAddress) : null;
}

program
  .command('worker')
  .description(
    'run a tilebreaker worker against TEMPORAL_ADDRESS (task queue TILEBREAKER_TASK_QUEUE, default "tilebreaker")',
  )
  .option(
    '--breaker-config <file>',
    'breaker policy (YAML or JSON, see docs/policy.md) for the entities this worker creates; existing ones keep theirs',
  )
  .option(
    '--sources-dir <dir...>',
    `folders requesters' sources files may be read from (default ${SOURCES_DIR_ENV}, else the working directory)`,
  )
  .option(
    '--output-dir <dir...>',
    `folders outputs, tile stores and work folders may be written under (default ${OUTPUT_DIR_ENV}, else the working directory)`,
  )
  .option(
    '--output-bucket <s3url...>',
    `bucket prefixes (s3://bucket/prefix) outputs, tile stores and work folders may be written under (default ${OUTPUT_BUCKETS_ENV}, else none)`,
  )
  .option(
    '--fetch-batches <n>',
    `the most mosaic fetch batches this worker runs at once, of any mosaics (default ${FETCH_BATCHES_ENV}, else ${DEFAULT_FETCH_BATCHES})`,
  )
  .option(
    '--json',
    'say what it waits for and where it runs as JSON lines (its start banner on stdout: address, namespace, task queue, identity, roots, fetch batches)',
  )
  .option(
    '--metrics-addr <ip:port>',
    `serve Prometheus metrics at http://IP:PORT/metrics (default ${METRICS_ADDR_ENV}; off unless set)`,
  )
  .option(
    '--deployment-name <name>',
    `the Worker Deployment this worker belongs to (default ${DEPLOYMENT_NAME_ENV}, else the task queue's name; docs/upgrading.md)`,
  )
  .option(
    '--build-id <id>',
    `this build's id in the deployment (default ${BUILD_ID_ENV}, else <package version>+<hash of the compiled code>)`,
  )
  .option(
    '--promote <auto|never>',
    `auto: once polling, make this build current if it never was and the current one is older (default ${PROMOTE_ENV}, else auto)`,
  )
  .option(
    '--versioning <on|off>',
    `off: an unversioned worker, as releases before Worker Deployments ran (default ${VERSIONING_ENV}, else on)`,
  )
  .action(async (o: WorkerCommandOptions & { metricsAddr?: string }) => {
    const metricsAt = await installRuntime({ flag: o.metricsAddr, fromEnv: true });
    const { runWorker } = await import('./worker-command.js');
    await runWorker(o, { logger, metricsAt });
  });

program
  .command('drill')
  .description('rehearse a breaker configuration against a scripted sequence of outcomes, on durable timers')
  .argument(
    '[file]',
    'JSON drill input ({ config, steps: [{ atMs, event }], settleMs }); default: the built-in demo outage',
  )
  .option('--json', 'print the result as JSON')
  .action(async (file: string | undefined, opts: { json?: boolean }) => {
    const { printDrill, readDrillFile, runDrill } = await import('./run-drill.js');
    const input = file ? readDrillFile(file) : (await import('../client/demo-drill.js')).demoDrill();
    await withTemporal(async ({ client, taskQueue }) =>
      printDrill(await runDrill(client, taskQueue, input), !!opts.json),
    );
  });

program
  .command('tile')
  .description(
    "fetch one tile through the pipeline's fetch path and print one JSON object (exit 0 when it is a good tile)",
  )
  .argument('<zxy>', 'the tile as Z/X/Y (XYZ rows, from the top)')
  .option('--sources <file>', 'sources file (YAML or JSON)')
  .option('--source <name>', 'which source in the file (default: its only one), as mosaic start and seed take it')
  .option('--name <source>', 'the same as --source')
  .option('--breaker', 'go through the fleet-wide breaker at TEMPORAL_ADDRESS')
  .option('--attempts <n>', "attempts, with the pipeline's backoff between them", '1')
  .option('--out <dir>', 'keep the tile in this tile store folder')
  .option('--json', 'print JSON (what tile always prints: accepted so that every command takes it)')
  .action(
    async (
      zxy: string,
      {
        json: _json,
        sources,
        source,
        ...opts
      }: Omit<TileCommandOptions, 'source'> & { source?: string; sources?: string; json?: boolean },
    ) => {
      // One spelling for every command: --sources FILE --source NAME. The older `--source FILE` (without
      // --sources) still works, with a note, when it names a .yaml, .yml or .json file.
      let file = sources;
      let name = opts.name;
      if (source !== undefined && file === undefined && /\.(ya?ml|json)$/i.test(source)) {
        console.error(
          'tilebreaker: tile --source FILE is the older spelling; give --sources FILE --source NAME, as mosaic start and seed take them',
        );
        file = source;
      } else if (source !== undefined) {
        if (name !== undefined && name !== source)
          throw new Error(
            `tile: --source ${JSON.stringify(source)} and --name ${JSON.stringify(name)} name different sources; give one`,
          );
        name = source;
      }
      if (file === undefined)
        throw new Error('tile: give the sources file with --sources FILE (and the source in it with --source NAME)');
      const { tileCommand } = await import('./tile-command.js');
      process.exitCode = await tileCommand(zxy, { ...opts, ...(name !== undefined ? { name } : {}), source: file });
    },
  );

program
  .command('sources')
  .description('sources files')
  .command('import')
  .description(
    'write sources from a WMS or WMTS capabilities document: layers, formats, styles, matrix sets (as grids), zoom ranges',
  )
  .argument('<url-or-file>', 'the GetCapabilities URL, or a saved document')
  .option('--out <file>', 'write the sources file here (default: stdout)')
  .option('--force', 'replace --out if it exists')
  .option(
    '--use-fetched-url',
    'send GetMap and KVP GetTile requests to the URL given here, not the one the document reports (a server behind a proxy)',
  )
  .option('--json', 'print { sources, notes } as JSON')
  .action(async (from: string, opts: { out?: string; force?: boolean; json?: boolean; useFetchedUrl?: boolean }) => {
    const { importSources } = await import('./sources-commands.js');
    process.exitCode = await importSources(from, opts);
  });

program
  .command('demo')
  .description(
    'the main job (npm start): a real mosaic from a bundled tile server that fails mid-run, on an embedded Temporal dev server',
  )
  .option('--out <dir>', 'where the mosaic, manifest and mask go', 'out/demo')
  .option(
    '--json',
    'print one JSON object at the end (result, breaker transitions, what the tile server saw); progress goes to stderr',
  )
  .option(
    '--metrics-addr <ip:port>',
    `serve Prometheus metrics at http://IP:PORT/metrics while the demo runs (default ${METRICS_ADDR_ENV}; npm start: 127.0.0.1:9464); a port that is taken is replaced by a free one, and the address used is printed`,
  )
  .option(
    '--console-port <n>',
    'serve the console on this port of 127.0.0.1 (default 8484, or a free one when that is taken)',
    portOption('--console-port'),
  )
  .option('--no-console', 'do not serve the console')
  .option(
    '--keep-console',
    'keep the console (and the embedded Temporal server) up after the demo, until Ctrl-C (the default in a terminal)',
  )
  .option(
    '--no-keep-console',
    'stop when the demo ends (the default when the output is not a terminal, or with --json)',
  )
  .action(
    async (o: {
      out: string;
      json?: boolean;
      metricsAddr?: string;
      consolePort?: number;
      console: boolean;
      keepConsole?: boolean;
    }) => {
      const { demoMosaic, DEMO_BREAKER } = await import('./demo-mosaic.js');
      const port = o.consolePort;
      await withTemporal(
        async ({ client, taskQueue, address, metricsAt }) => {
          if (!o.json) console.log(`tilebreaker demo: Temporal at ${address}, worker on task queue ${taskQueue}`);
          if (metricsAt) console.error(`tilebreaker demo: metrics at ${metricsAt}`);
          // Loaded only when served: --no-console runs the demo without the page's modules.
          const consoleModule = o.console ? await import('./console-command.js') : null;
          const web = consoleModule
            ? await consoleModule.serveConsole(client, taskQueue, port !== undefined ? { port } : {})
            : null;
          if (web) console.error(`tilebreaker demo: console at ${web.url} (read-only)`);
          try {
            process.exitCode = await demoMosaic(client, taskQueue, o.out, { json: !!o.json });
            // In a terminal someone is there to look at the page; a script or CI wants the demo to end.
            const keep = o.keepConsole ?? (!!process.stdout.isTTY && !o.json);
            if (web && keep) {
              console.error(`tilebreaker demo: done; the console stays up at ${web.url} until Ctrl-C`);
              await consoleModule!.untilInterrupted();
            } else if (web && !o.json)
              console.log('(the console closed with the demo: `npm start -- --keep-console` keeps it up)');
          } finally {
            await web?.close();
          }
        },
        { breaker: DEMO_BREAKER, metrics: { flag: o.metricsAddr, fromEnv: true, anyPortIfTaken: true } },
      );
    },
  );

/**
 * Runs `fn` with a client and a worker polling the task queue: against TEMPORAL_ADDRESS when set,
 * otherwise against an embedded dev server that is stopped afterwards. `metrics`: the demo's endpoint.
 */
async function withTemporal(
  fn: (ctx: { client: Client; taskQueue: string; address: string; metricsAt: string | null }) => Promise<void>,
  opts: {
    breaker?: CreateWorkerOptions['breaker'];
    metrics?: { flag: string | undefined; fromEnv: boolean; anyPortIfTaken?: boolean };
  } = {},
): Promise<void> {
  const metricsAt = await installRuntime(opts.metrics ?? { flag: undefined, fromEnv: false });
  const [{ connectionConfigFromEnv }, { startEmbeddedServer }, { connectClient }, { connectWorker, createWorker }] =
    await Promise.all([
      import('../client/connection-config.js'),
      import('../client/embedded-server.js'),
      import('../client/temporal.js'),
      import('../client/worker.js'),
    ]);
  const config = connectionConfigFromEnv();
  let server: Awaited<ReturnType<typeof startEmbeddedServer>> | undefined;
  if (!config.address) {
    console.error(
      'tilebreaker: TEMPORAL_ADDRESS is unset; starting a local Temporal dev server (state in .temporal/dev-server.sqlite)',
    );
    server = await startEmbeddedServer();
  }
  const address = config.address ?? server!.address;
  const namespace = server ? server.namespace : config.namespace;
  try {
    const { client, connection } = await connectClient({ ...config, address, namespace });
    const workerConnection = await connectWorker({ ...config, address, namespace });
    const worker = await createWorker({
      connection: workerConnection,
      client,
      namespace,
      taskQueue: config.taskQueue,
      ...(opts.breaker ? { breaker: opts.breaker } : {}),
    });
    try {
      await worker.runUntil(fn({ client, taskQueue: config.taskQueue, address, metricsAt }));
    } finally {
      await connection.close();
      await workerConnection.close();
    }
  } finally {
    await server?.stop();
  }
}

/** A client for TEMPORAL_ADDRESS: these commands act on the fleet's server, never on an embedded one. */
async function withClient(
  fn: (ctx: { client: Client; taskQueue: string }) => Promise<void>,
  what = 'this command needs',
): Promise<void> {
  const [{ connectionConfigFromEnv }, { connectClient }] = await Promise.all([
    import('../client/connection-config.js'),
    import('../client/temporal.js'),
  ]);
  const config = connectionConfigFromEnv();
  if (!config.address) {
    throw new Error(
      `${what} TEMPORAL_ADDRESS: name the Temporal frontend the fleet uses, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233`,
    );
  }
  // connectClient's error names the address tried when the server cannot be reached.
  const { client, connection } = await connectClient({ ...config, address: config.address });
  try {
    await fn({ client, taskQueue: config.taskQueue });
  } finally {
    await connection.close();
  }
}

/**
 * The command groups, registered from their modules only when needed: a line that names a group loads that
 * group alone; `--help`, a bare `tilebreaker` or an unknown command loads them all (help lists every command).
 * Registered in this order either way, so help reads the same.
 */
const GROUPS: Record<string, () => Promise<void>> = {
  breaker: async () => {
    const { registerBreakerCommands } = await import('./breaker-commands.js');
    registerBreakerCommands(program, (fn) =>
      withClient(({ client, taskQueue }) => fn(client, taskQueue), 'breaker commands need'),
    );
  },
  mosaic: async () => {
    const [{ registerMosaicCommands }, { connectionConfigFromEnv }] = await Promise.all([
      import('./mosaic-commands.js'),
      import('../client/connection-config.js'),
    ]);
    const withLocal: WithClient = (fn) => (connectionConfigFromEnv().address ? withClient(fn) : withTemporal(fn));
    registerMosaicCommands(program, {
      withClient: (fn) => withClient(fn),
      // Without TEMPORAL_ADDRESS, `mosaic start --wait` (and `seed`) runs on an embedded server with a worker in this process.
      withLocal,
    });
    const { registerSeedCommand } = await import('./seed-commands.js');
    registerSeedCommand(program, { withLocal, withClient: (fn) => withClient(fn) });
  },
  console: async () => {
    const { registerConsoleCommand } = await import('./console-command.js');
    registerConsoleCommand(program, withClient);
  },
};
/** `schedule` is registered with `mosaic`, by the same module; `seed` with them. */
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
