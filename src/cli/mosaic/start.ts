import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { mosaicStatus, startMosaic, type MosaicStatus } from '../../client/mosaics';
import { temporalUnreachable, throughOutages } from '../../client/server-wait';
import { checkMosaicName, defaultMosaicName } from '../../messages/mosaic-names';
import { DEFAULT_BATCH_SIZE } from '../../messages/mosaic-request';
import { addAreaOptions } from '../area-options';
import { addFallbackOptions } from '../fallback-options';
import { preflight } from '../preflight';
import type { ClientRunners } from '../runners';
import { outageLines, showMosaicProgress } from './progress';
import { requestFromOptions, sourcesFrom, type StartOptions } from './request';
import { finish } from './result';

const noop = () => undefined;

/** `mosaic start`: a mosaic from --request FILE and/or flags, started, and with --wait or --watch followed. */
export function registerMosaicStart(mosaic: Command, runners: ClientRunners): void {
  const cmd = mosaic
    .command('start')
    .description('start a mosaic workflow (from --request FILE and/or flags)')
    .option('--request <file>', 'a mosaic request (YAML or JSON); flags override its fields')
    .option(
      '--sources <file>',
      'sources file (YAML or JSON): an absolute path names it on every host; a relative one is read by the workers from their first sources root (and here, to check the request, from this folder when it has a copy)',
    )
    .option(
      '--sources-on-worker',
      'the sources file exists only on the workers (its path as they see it, or relative to their first sources root): not read here, the workers check it',
    )
    .option('--source <name>', 'which source in the sources file');
  addAreaOptions(cmd)
    .option('--zoom <z>', 'zoom level')
    .option('--out <path.tif>', 'output GeoTIFF; manifest, mask and sidecars go beside it')
    .option('--format <list>', 'also write png and/or webp, e.g. png,webp')
    .option(
      '--no-sidecars',
      "no .aux.xml, world file or .prj beside the GeoTIFF (its georeferencing is inside it; the png/webp copies and the mask keep theirs, and a copy's .prj shares the GeoTIFF's stem)",
    );
  addFallbackOptions(cmd)
    .option('--max-tiles <n>', 'refuse plans larger than this (default 100000)')
    .option('--store <dir>', 'tile store folder (default <out>.tiles)')
    .option(
      '--refresh-before <age|instant>',
      'refresh mode: keep stored tiles fetched within this age (7d, 12h) or since this ISO instant; fetch only older ones, conditionally',
    )
    .option('--batch-size <n>', `tiles per fetch activity (default ${DEFAULT_BATCH_SIZE})`)
    .option('--block-tiles <n>', 'tiles per child workflow of a large job (default 16384)')
    .option('--parallel-batches <n>', 'fetch activities in flight per block (default 4)')
    .option('--no-breaker', 'fetch without the fleet-wide breaker')
    .option(
      '--name <name>',
      "the mosaic's name, for status, watch, cancel, redrive and list (default: the output's base name, alps for /data/alps.tif)",
    )
    .option(
      '--id <workflowId>',
      'workflow id (default mosaic/<base name>-<hash of the output path>: one run of an output at a time)',
    )
    .option('--wait', 'wait for the result and exit with its code')
    .option('--no-wait', 'start it and return (the default without --wait or --watch)')
    .option('--watch', 'show progress until the mosaic ends, then its result')
    .option('--json', 'print JSON')
    .action((o: StartOptions) => startAction(o, runners));
}

async function startAction(o: StartOptions, { withClient, withLocal }: ClientRunners): Promise<void> {
  if (o.name !== undefined) checkMosaicName(o.name, '--name');
  const request = requestFromOptions(o);
  await preflight(request, { sourcesOnWorker: !!o.sourcesOnWorker, sourcesFrom: sourcesFrom(o) });
  await (o.wait || o.watch ? withLocal : withClient)(async ({ client, taskQueue }) => {
    const name = o.name ?? defaultMosaicName(request.output);
    const handle = await startMosaic(client, taskQueue, request, {
      name,
      ...(o.id !== undefined ? { workflowId: o.id } : {}),
    });
    if (!o.wait && !o.watch) {
      if (o.json)
        console.log(JSON.stringify({ name, workflowId: handle.workflowId, runId: handle.firstExecutionRunId }));
      else
        console.log(
          `started mosaic ${handle.workflowId} (name ${name}, run ${handle.firstExecutionRunId}); follow it with: tilebreaker mosaic watch ${name}`,
        );
      return;
    }
    process.exitCode = finish(await untilEnded(client, handle, !!o.watch), !!o.json);
  });
}

/** A started mosaic followed to its end, through server outages: with a progress bar (--watch), or quietly. */
async function untilEnded(
  client: Client,
  handle: Awaited<ReturnType<typeof startMosaic>>,
  watch: boolean,
): Promise<MosaicStatus> {
  if (watch) return showMosaicProgress(client, handle.workflowId);
  const ride = { ...outageLines(), what: handle.workflowId };
  // The run's end, however it ended; only an unreachable server is retried, not a failed run.
  const ended = () =>
    handle.result().then(noop, (err: unknown) => {
      if (temporalUnreachable(err)) throw err;
    });
  return throughOutages(ended, ride).then(() => throughOutages(() => mosaicStatus(client, handle.workflowId), ride));
}
