/**
 * Records the history of a finished workflow run into test/histories/, where the replay test replays it
 * against the current workflow code on every test run (an incompatible workflow change then fails CI).
 *
 *   npm run record-history -- --scenario drill-outage         run a built-in scenario on the time-skipping server
 *   npm run record-history -- --workflow-id ID --name NAME    take a finished run from the server at TEMPORAL_ADDRESS
 *
 * Never edit a recorded history to make a replay pass: change the workflow with patched() or a new type.
 */
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { Command } from 'commander';
import { connectionConfigFromEnv } from '../src/client/connection-config';
import { recordHistory, saveHistory } from '../src/client/histories';
import { packageRoot } from '../src/client/local-server';
import { breakerDrillWorkflow } from '../src/workflows';
import { createWorker } from '../src/client/worker';
import { ALL_SEARCH_ATTRIBUTES } from '../src/messages/search-attributes';
import { TEST_ROOTS, devServerEnv, timeSkippingEnv, uniqueTaskQueue } from '../test/helpers/temporal-env';
import { outageDrill } from '../test/scenarios/drill-outage';
import { entityScenarios, type EntityScenario } from '../test/scenarios/entity-scenarios';
import { mosaicScenarios, SCENARIO_BREAKER } from '../test/scenarios/mosaic-scenarios';

const drillOutage: EntityScenario = async ({ client, taskQueue }) => {
  const handle = await client.workflow.start(breakerDrillWorkflow, {
    args: [outageDrill()],
    taskQueue,
    workflowId: 'drill-outage',
  });
  await handle.result();
  return handle;
};

const scenarios: Record<string, EntityScenario> = {
  'drill-outage': drillOutage,
  ...entityScenarios,
  ...mosaicScenarios,
};
type ScenarioName = keyof typeof scenarios;

const historiesDir = path.join(packageRoot(), 'test', 'histories');

/**
 * Saves the run's history as `<name>.json`. A run that continued from others (continue-as-new) is saved with
 * the first run of its chain: the first as `<name>.json` (it ends in the hand-over), the newest as
 * `<name>-last.json` (it starts from what was carried).
 */
async function save(handle: WorkflowHandle, name: string): Promise<void> {
  const newest = await handle.fetchHistory();
  let first = newest;
  for (let previous = runBefore(newest); previous; previous = runBefore(first)) {
    first = await handle.client.getHandle(handle.workflowId, previous).fetchHistory();
  }
  const runs: [History, string][] =
    first === newest
      ? [[newest, name]]
      : [
          [first, name],
          [newest, `${name}-last`],
        ];
  for (const [history, file] of runs.map(([h, n]) => [h, path.join(historiesDir, `${n}.json`)] as const)) {
    saveHistory(history, file);
    console.log(
      `recorded ${history.events?.length ?? 0} events of ${handle.workflowId} to ${path.relative(process.cwd(), file)}`,
    );
  }
}

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

/** The run this one continued from, if it did. */
function runBefore(history: History): string | undefined {
  return history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
}

async function recordScenario(name: ScenarioName): Promise<void> {
  const scenario = scenarios[name]!;
  // Mosaics fetch real tiles while breakers cool down: time-skipping would race the workflow clock past the
  // guard's real one (every refusal then says "come back in minutes"), so they record on a dev server.
  const env = name in mosaicScenarios ? await devServerEnv(ALL_SEARCH_ATTRIBUTES) : await timeSkippingEnv();
  try {
    const taskQueue = uniqueTaskQueue(name);
    // Entity scenarios configure their entities; mosaic scenarios get entities from the guard, with this policy.
    const worker = await createWorker({
      connection: env.nativeConnection,
      client: env.client,
      namespace: 'default',
      taskQueue,
      breaker: SCENARIO_BREAKER,
      roots: TEST_ROOTS,
    });
    await worker.runUntil(async () => save(await scenario({ env, client: env.client, taskQueue }), name));
  } finally {
    await env.teardown();
  }
}

async function recordExisting(workflowId: string, runId: string | undefined, name: string): Promise<void> {
  const conn = connectionConfigFromEnv();
  if (!conn.address) throw new Error('--workflow-id needs TEMPORAL_ADDRESS to name the server that ran it');
  const connection = await Connection.connect({
    address: conn.address,
    tls: conn.tls,
    ...(conn.apiKey ? { apiKey: conn.apiKey } : {}),
  });
  try {
    const client = new Client({ connection, namespace: conn.namespace });
    const { file, events } = await recordHistory(
      client,
      workflowId,
      path.join(historiesDir, `${name}.json`),
      runId !== undefined ? { runId } : {},
    );
    console.log(`recorded ${events} events of ${workflowId} to ${path.relative(process.cwd(), file)}`);
  } finally {
    await connection.close();
  }
}

const program = new Command('record-history')
  .description('record a finished workflow history into test/histories/ for the replay test')
  .option('--all', 'record every built-in scenario')
  .option(
    '--scenario <name>',
    `run a built-in scenario on the time-skipping server (${Object.keys(scenarios).join(', ')})`,
  )
  .option('--workflow-id <id>', 'record a finished run from the server at TEMPORAL_ADDRESS')
  .option('--run-id <id>', 'with --workflow-id: a specific run')
  .option('--name <name>', 'file name (without .json) under test/histories/')
  .action(async (opts: { all?: boolean; scenario?: string; workflowId?: string; runId?: string; name?: string }) => {
    if (opts.all) {
      for (const name of Object.keys(scenarios)) await recordScenario(name);
    } else if (opts.scenario) {
      if (!(opts.scenario in scenarios))
        program.error(
          `--scenario: unknown scenario ${JSON.stringify(opts.scenario)}; known: ${Object.keys(scenarios).join(', ')}`,
        );
      await recordScenario(opts.scenario);
    } else if (opts.workflowId) {
      await recordExisting(opts.workflowId, opts.runId, opts.name ?? opts.workflowId.replace(/[^\w.-]+/g, '_'));
    } else {
      program.error('give --scenario NAME or --workflow-id ID');
    }
  });

program.parseAsync().catch((err: unknown) => {
  console.error(`record-history: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
