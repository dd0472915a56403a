import type { Command } from 'commander';
import { OUTPUT_BUCKETS_ENV, OUTPUT_DIR_ENV, SOURCES_DIR_ENV } from '../../activities/confine/roots';
import { DEFAULT_FETCH_BATCHES, FETCH_BATCHES_ENV } from '../../client/fetch-batches';
import { METRICS_ADDR_ENV } from '../../client/telemetry';
import { BUILD_ID_ENV, DEPLOYMENT_NAME_ENV, PROMOTE_ENV, VERSIONING_ENV } from '../../client/versioning';
import type { Runners } from '../runners';
import type { WorkerCommandOptions } from '../worker-command';

/** `tilebreaker worker`: its options; src/cli/worker-command.ts (loaded when it runs) runs it. */
export function registerWorkerCommand(program: Command, run: Runners): void {
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
      const metricsAt = await run.installRuntime({ flag: o.metricsAddr, fromEnv: true });
      const { runWorker } = await import('../worker-command.js');
      await runWorker(o, { logger: run.logger, metricsAt });
    });
}
