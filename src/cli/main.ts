#!/usr/bin/env node
import { Runtime } from '@temporalio/worker';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { parsePolicyConfig, type PolicyConfigInput } from '../breaker';
import { connectionConfigFromEnv } from '../client/connection-config';
import { demoDrill } from '../client/demo-drill';
import { startEmbeddedServer, type EmbeddedServer } from '../client/embedded-server';
import { connectClient } from '../client/temporal';
import { packageRoot } from '../client/local-server';
import { connectWorker, createWorker, DEFAULT_FETCH_BATCHES, FETCH_BATCHES_ENV, parseFetchBatches } from '../client/worker';
import { fetchTaskQueue } from '../messages/activities';
import { BUILD_ID_ENV, DEPLOYMENT_NAME_ENV, PROMOTE_ENV, VERSIONING_ENV, versioningFrom } from '../client/versioning';
import { untilServerReady } from '../client/server-wait';
import { METRICS_ADDR_ENV, metricsUrl, parseMetricsAddr, prometheusTelemetry } from '../client/telemetry';
import { OUTPUT_BUCKETS_ENV, OUTPUT_DIR_ENV, rootsFromEnv, SOURCES_DIR_ENV, withRoots } from '../activities/confine/roots';
import { registerBreakerCommands } from './breaker-commands';
import { LineLogger, logSettings } from './logging';
import { demoMosaic, DEMO_BREAKER } from './demo-mosaic';
import { registerMosaicCommands } from './mosaic-commands';
import { printDrill, readDrillFile, runDrill } from './run-drill';
import { tileCommand, type TileCommandOptions } from './tile-command';

// One JSON line per entry, through the runtime: breaker transitions and fail-opens (INFO and WARN) show at a
// worker's default level; the SDK's own INFO chatter (worker state changes, bundling) does not.
let logger: LineLogger;
try {
  logger = new LineLogger(logSettings(process.env, 'WARN'));
} catch (err) {
  console.error(`tilebreaker: ${(err as Error).message}`);
  process.exit(2);
}

/** The Prometheus endpoint this process serves, once the runtime is installed (worker and demo only). */
let metricsAt: string | null = null;

const program = new Command('tilebreaker')
  .description('Nightly map mosaics from WMS / WMTS / XYZ tile services behind fleet-wide circuit breakers, on Temporal')
  .version(packageVersion(), '--version', 'print the version')
  .showHelpAfterError()
  // A usage error exits 2, as every failure to run does here (commander's default, 1, means "ran, and the
  // answer is no" in this CLI); help exits 0. Subcommands inherit this.
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));

// The SDK's runtime, once per process, before any connection: with a Prometheus endpoint when the command
// serves metrics (`--metrics-addr`, else TILEBREAKER_METRICS_ADDR; off unless set).
program.hook('preAction', (_program, command) => {
  const flag = command.opts<{ metricsAddr?: string }>().metricsAddr;
  const env = command.name() === 'worker' || command.name() === 'demo' ? process.env[METRICS_ADDR_ENV] || undefined : undefined;
  const what = flag !== undefined ? '--metrics-addr' : METRICS_ADDR_ENV;
  const value = flag ?? env;
  const addr = value !== undefined ? parseMetricsAddr(value, what) : null;
  try {
    Runtime.install({ logger, ...(addr ? { telemetryOptions: prometheusTelemetry(addr.bindAddress) } : {}) });
  } catch (err) {
    // The one failure here in practice: the port is taken ("Address already in use").
    throw new Error(`${what} ${value ?? ''}: ${(err as Error).message}`, { cause: err });
  }
  metricsAt = addr ? metricsUrl(addr.bindAddress) : null;
});

program
  .command('worker')
  .description('run a tilebreaker worker against TEMPORAL_ADDRESS (task queue TILEBREAKER_TASK_QUEUE, default "tilebreaker")')
  .option('--breaker-config <file>', 'breaker policy (YAML or JSON, see README) for the entities this worker creates; existing ones keep theirs')
  .option('--sources-dir <dir...>', `folders requesters' sources files may be read from (default ${SOURCES_DIR_ENV}, else the working directory)`)
  .option('--output-dir <dir...>', `folders outputs, tile stores and work folders may be written under (default ${OUTPUT_DIR_ENV}, else the working directory)`)
  .option('--output-bucket <s3url...>', `bucket prefixes (s3://bucket/prefix) outputs, tile stores and work folders may be written under (default ${OUTPUT_BUCKETS_ENV}, else none)`)
  .option('--fetch-batches <n>', `the most mosaic fetch batches this worker runs at once, of any mosaics (default ${FETCH_BATCHES_ENV}, else ${DEFAULT_FETCH_BATCHES})`)
  .option('--json', 'say what it waits for and where it runs as JSON lines (its start banner on stdout: address, namespace, task queue, identity, roots, fetch batches)')
  .option('--metrics-addr <ip:port>', `serve Prometheus metrics at http://IP:PORT/metrics (default ${METRICS_ADDR_ENV}; off unless set)`)
  .option('--deployment-name <name>', `the Worker Deployment this worker belongs to (default ${DEPLOYMENT_NAME_ENV}, else the task queue's name; docs/upgrading.md)`)
  .option('--build-id <id>', `this build's id in the deployment (default ${BUILD_ID_ENV}, else <package version>+<hash of the compiled code>)`)
  .option('--promote <auto|never>', `auto: once polling, make this build current if it never was and the current one is older (default ${PROMOTE_ENV}, else auto)`)
  .option('--versioning <on|off>', `off: an unversioned worker, as releases before Worker Deployments ran (default ${VERSIONING_ENV}, else on)`)
  .action(
    async (o: {
      breakerConfig?: string;
      sourcesDir?: string[];
      outputDir?: string[];
      outputBucket?: string[];
      fetchBatches?: string;
      json?: boolean;
      deploymentName?: string;
      buildId?: string;
      promote?: string;
      versioning?: string;
    }) => {
      // A long-running worker logs its breakers' transitions by default.
      logger.settings = logSettings(process.env, 'INFO');
      const envBatches = process.env[FETCH_BATCHES_ENV];
      const fetchBatches =
        o.fetchBatches !== undefined
          ? parseFetchBatches(o.fetchBatches, 'worker: --fetch-batches')
          : envBatches !== undefined && envBatches !== ''
            ? parseFetchBatches(envBatches, `worker: ${FETCH_BATCHES_ENV}`)
            : DEFAULT_FETCH_BATCHES;
      const breaker = o.breakerConfig ? { config: readPolicyFile(o.breakerConfig) } : undefined;
      const roots = withRoots(rootsFromEnv(), {
        ...(o.sourcesDir ? { sources: o.sourcesDir } : {}),
        ...(o.outputDir ? { outputs: o.outputDir } : {}),
        ...(o.outputBucket ? { buckets: o.outputBucket } : {}),
      });
      const config = connectionConfigFromEnv();
      const versioning = versioningFrom(o, config.taskQueue);
      if (!config.address) throw new Error('worker: TEMPORAL_ADDRESS is not set; name the Temporal frontend, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233');
      const address = config.address;
      // A server that is down or still starting is waited for; SIGINT / SIGTERM stop the wait.
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
      const { worker, connection, clientConnection } = await untilServerReady(
        async () => {
          const connection = await connectWorker({ ...config, address });
          try {
            const { client, connection: clientConnection } = await connectClient({ ...config, address });
            try {
              // The namespace first, from the client: a worker created before it exists logs a warning per try.
              await client.connection.workflowService.describeNamespace({ namespace: config.namespace });
              const worker = await createWorker({
                connection,
                client,
                namespace: config.namespace,
                taskQueue: config.taskQueue,
                roots,
                fetchBatches,
                ...(breaker ? { breaker } : {}),
                ...(versioning ? { versioning } : {}),
              });
              return { worker, connection, clientConnection };
            } catch (err) {
              await clientConnection.close();
              throw err;
            }
          } catch (err) {
            await connection.close();
            throw err;
          }
        },
        {
          say: (line) => console.error(o.json ? JSON.stringify({ time: new Date().toISOString(), event: 'waiting for server', msg: line }) : line),
          what: `the Temporal server at ${address} (namespace ${config.namespace})`,
          signal: stop.signal,
        },
      );
      process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
      if (o.json) {
        // One line a supervisor or a log pipeline can read: where this worker runs and under which identity.
        const banner = {
          event: 'worker started',
          address,
          namespace: config.namespace,
          taskQueue: config.taskQueue,
          identity: worker.options.identity,
          roots: { sources: roots.sources, outputs: roots.outputs, buckets: roots.buckets ?? [] },
          metrics: metricsAt,
          fetchBatches,
          deployment: versioning ? { deploymentName: versioning.deploymentName, buildId: versioning.buildId, promote: versioning.promote } : null,
        };
        console.log(JSON.stringify({ time: new Date().toISOString(), ...banner }));
      } else {
        console.error(`tilebreaker worker: ${config.address} namespace ${config.namespace} task queue ${config.taskQueue} (identity ${worker.options.identity})`);
        console.error(`  reads sources files under ${roots.sources.join(', ')}; writes under ${[...roots.outputs, ...(roots.buckets ?? [])].join(', ')}`);
        console.error(metricsAt ? `  metrics at ${metricsAt}` : `  metrics off (--metrics-addr or ${METRICS_ADDR_ENV} turns them on)`);
        console.error(`  runs at most ${fetchBatches} fetch batch(es) at once (task queue ${fetchTaskQueue(config.taskQueue)})`);
        console.error(
          versioning
            ? `  build ${versioning.buildId} of deployment ${versioning.deploymentName} (promote: ${versioning.promote})`
            : '  unversioned (--versioning on makes it a build of a Worker Deployment)',
        );
      }
      // Worker.run resolves after SIGINT/SIGTERM once in-flight tasks drain.
      await worker.run();
      await connection.close();
      await clientConnection.close();
    },
  );

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
  .description("fetch one tile through the pipeline's fetch path and print one JSON object (exit 0 when it is a good tile)")
  .argument('<zxy>', 'the tile as Z/X/Y (XYZ rows, from the top)')
  .option('--sources <file>', 'sources file (YAML or JSON)')
  .option('--source <file>', 'the same as --sources (the older spelling)')
  .option('--name <source>', 'which source in the file (default: its only one)')
  .option('--breaker', 'go through the fleet-wide breaker at TEMPORAL_ADDRESS')
  .option('--attempts <n>', "attempts, with the pipeline's backoff between them", '1')
  .option('--out <dir>', 'keep the tile in this tile store folder')
  .option('--json', 'print JSON (what tile always prints: accepted so that every command takes it)')
  .action(async (zxy: string, { json: _json, ...opts }: Omit<TileCommandOptions, 'source'> & { source?: string; sources?: string; json?: boolean }) => {
    // One spelling for every command: --sources FILE (as mosaic start and redrive take it).
    const file = opts.sources ?? opts.source;
    if (file === undefined) throw new Error('tile: give the sources file with --sources FILE');
    process.exitCode = await tileCommand(zxy, { ...opts, source: file });
  });

program
  .command('demo')
  .description('the main job (npm start): a real mosaic from a bundled tile server that fails mid-run, on an embedded Temporal dev server')
  .option('--out <dir>', 'where the mosaic, manifest and mask go', 'out/demo')
  .option('--json', 'print one JSON object at the end (result, breaker transitions, what the tile server saw); progress goes to stderr')
  .option('--metrics-addr <ip:port>', `serve Prometheus metrics at http://IP:PORT/metrics while the demo runs (default ${METRICS_ADDR_ENV}; npm start: 127.0.0.1:9464)`)
  .action(async (o: { out: string; json?: boolean }) => {
    await withTemporal(
      async ({ client, taskQueue, address }) => {
        if (!o.json) console.log(`tilebreaker demo: Temporal at ${address}, worker on task queue ${taskQueue}`);
        if (metricsAt) console.error(`tilebreaker demo: metrics at ${metricsAt}`);
        process.exitCode = await demoMosaic(client, taskQueue, o.out, { json: !!o.json });
      },
      { breaker: DEMO_BREAKER },
    );
  });

/**
 * Runs `fn` with a client and a worker polling the task queue: against TEMPORAL_ADDRESS when set,
 * otherwise against an embedded dev server that is stopped afterwards.
 */
async function withTemporal(
  fn: (ctx: { client: import('@temporalio/client').Client; taskQueue: string; address: string }) => Promise<void>,
  opts: { breaker?: Parameters<typeof createWorker>[0]['breaker'] } = {},
): Promise<void> {
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
    const worker = await createWorker({ connection: workerConnection, client, namespace, taskQueue: config.taskQueue, ...(opts.breaker ? { breaker: opts.breaker } : {}) });
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

/** A client for TEMPORAL_ADDRESS: these commands act on the fleet's server, never on an embedded one. */
async function withClient(fn: (ctx: { client: import('@temporalio/client').Client; taskQueue: string }) => Promise<void>, what = 'this command needs'): Promise<void> {
  const config = connectionConfigFromEnv();
  if (!config.address) {
    throw new Error(`${what} TEMPORAL_ADDRESS: name the Temporal frontend the fleet uses, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233`);
  }
  // connectClient's error names the address tried when the server cannot be reached.
  const { client, connection } = await connectClient({ ...config, address: config.address });
  try {
    await fn({ client, taskQueue: config.taskQueue });
  } finally {
    await connection.close();
  }
}

registerBreakerCommands(program, (fn) => withClient(({ client, taskQueue }) => fn(client, taskQueue), 'breaker commands need'));
registerMosaicCommands(program, {
  withClient: (fn) => withClient(fn),
  // Without TEMPORAL_ADDRESS, `mosaic start --wait` runs on an embedded server with a worker in this process.
  withLocal: (fn) => (connectionConfigFromEnv().address ? withClient(fn) : withTemporal(fn)),
});

/** A breaker policy file, validated now: a typo fails the worker's start, not every entity it creates. */
function readPolicyFile(file: string): PolicyConfigInput {
  let data: unknown;
  try {
    const text = readFileSync(file, 'utf8');
    data = /\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new Error(`--breaker-config ${file}: ${(err as Error).message}`, { cause: err });
  }
  parsePolicyConfig(data);
  return data as PolicyConfigInput;
}

program.parseAsync().catch((err: unknown) => {
  console.error(`tilebreaker: ${err instanceof Error ? err.message : String(err)}`);
  // 2: the command could not run (bad input, unreachable server); 1 is kept for "ran, and the answer is no".
  process.exit(2);
});

/** tilebreaker's version, from its package.json. */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
