import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parsePolicyConfig, type PolicyConfigInput } from '../breaker';
import { rootsFromEnv, withRoots, type WorkerRoots } from '../activities/confine/roots';
import { connectionConfigFromEnv, type ConnectionConfig } from '../client/connection-config';
import { DEFAULT_FETCH_BATCHES, FETCH_BATCHES_ENV, parseFetchBatches } from '../client/fetch-batches';
import { untilServerReady } from '../client/server-wait';
import { METRICS_ADDR_ENV } from '../client/telemetry';
import { connectClient } from '../client/temporal';
import { versioningFrom } from '../client/versioning';
import { connectWorker, createWorker } from '../client/worker';
import { fetchTaskQueue } from '../messages/activities';
import { logSettings, type LineLogger } from './logging';

/** `tilebreaker worker`'s options, as commander parses them (src/cli/commands/worker.ts declares them). */
export interface WorkerCommandOptions {
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
}

/** What a worker is made with: the settings of its flags and environment, checked. */
interface WorkerSetup {
  config: ConnectionConfig;
  address: string;
  roots: WorkerRoots;
  fetchBatches: number;
  breaker: { config: PolicyConfigInput } | undefined;
  versioning: ReturnType<typeof versioningFrom>;
}

/**
 * `tilebreaker worker`: waits for its server, starts the worker and runs it until SIGINT / SIGTERM. Loaded
 * only by that command (it brings the SDK's worker, the activities and the workflow bundling with it).
 * `metricsAt`: the Prometheus endpoint the runtime serves, or null.
 */
export async function runWorker(
  o: WorkerCommandOptions,
  { logger, metricsAt }: { logger: LineLogger; metricsAt: string | null },
): Promise<void> {
  // A long-running worker logs its breakers' transitions by default.
  logger.settings = logSettings(process.env, 'INFO');
  const setup = workerSetup(o);
  const { worker, connection, clientConnection } = await startWhenServerReady(setup, !!o.json);
  printStarted(setup, { identity: worker.options.identity, metricsAt }, !!o.json);
  // Worker.run resolves after SIGINT/SIGTERM once in-flight tasks drain.
  await worker.run();
  await connection.close();
  await clientConnection.close();
}

/** The worker's settings from its flags, else the environment; a bad one throws before anything connects. */
function workerSetup(o: WorkerCommandOptions): WorkerSetup {
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
  if (!config.address)
    throw new Error(
      'worker: TEMPORAL_ADDRESS is not set; name the Temporal frontend, e.g. TEMPORAL_ADDRESS=127.0.0.1:7233',
    );
  return { config, address: config.address, roots, fetchBatches, breaker, versioning };
}

/** The worker, created once its server answers: a server that is down or still starting is waited for. */
async function startWhenServerReady(s: WorkerSetup, json: boolean) {
  // SIGINT / SIGTERM stop the wait.
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
  const started = await untilServerReady(() => connectAndCreate(s), {
    say: (line) =>
      console.error(
        json ? JSON.stringify({ time: new Date().toISOString(), event: 'waiting for server', msg: line }) : line,
      ),
    what: `the Temporal server at ${s.address} (namespace ${s.config.namespace})`,
    signal: stop.signal,
  });
  process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
  return started;
}

/** One try: the worker's and the client's connections, and the worker; what was opened is closed on failure. */
async function connectAndCreate({ config, address, roots, fetchBatches, breaker, versioning }: WorkerSetup) {
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
}

/** The start banner: one JSON line on stdout under --json, else lines on stderr. */
function printStarted(
  { config, address, roots, fetchBatches, versioning }: WorkerSetup,
  { identity, metricsAt }: { identity: string; metricsAt: string | null },
  json: boolean,
): void {
  if (json) {
    // One line a supervisor or a log pipeline can read: where this worker runs and under which identity.
    const banner = {
      event: 'worker started',
      address,
      namespace: config.namespace,
      taskQueue: config.taskQueue,
      identity,
      roots: { sources: roots.sources, outputs: roots.outputs, buckets: roots.buckets ?? [] },
      metrics: metricsAt,
      fetchBatches,
      deployment: versioning
        ? { deploymentName: versioning.deploymentName, buildId: versioning.buildId, promote: versioning.promote }
        : null,
    };
    console.log(JSON.stringify({ time: new Date().toISOString(), ...banner }));
    return;
  }
  console.error(
    `tilebreaker worker: ${config.address} namespace ${config.namespace} task queue ${config.taskQueue} (identity ${identity})`,
  );
  console.error(
    `  reads sources files under ${roots.sources.join(', ')}; writes under ${[...roots.outputs, ...(roots.buckets ?? [])].join(', ')}`,
  );
  console.error(
    metricsAt ? `  metrics at ${metricsAt}` : `  metrics off (--metrics-addr or ${METRICS_ADDR_ENV} turns them on)`,
  );
  console.error(
    `  runs at most ${fetchBatches} fetch batch(es) at once (task queue ${fetchTaskQueue(config.taskQueue)})`,
  );
  console.error(
    versioning
      ? `  build ${versioning.buildId} of deployment ${versioning.deploymentName} (promote: ${versioning.promote})`
      : '  unversioned (--versioning on makes it a build of a Worker Deployment)',
  );
}

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
