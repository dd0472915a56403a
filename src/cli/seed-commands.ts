import type { Command } from 'commander';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import path from 'node:path';
import { createSeedSchedule } from '../client/schedules';
import { seedExitCode, startSeed } from '../client/seeds';
import { EXIT } from '../client/mosaics';
import type { MosaicRequest } from '../messages/mosaic-types';
import { checkSeedRequest, type SeedRequest, type SeedResult } from '../messages/seed-types';
import { outageLines } from './mosaic/progress';
import type { ClientRunners, WithClient } from './runners';
import { TemporalUnreachableError, throughOutages } from '../client/server-wait';
import { addAreaOptions, parseBbox, readCoverageFile } from './area-options';
import { addFallbackOptions } from './fallback-options';
import { preflightPlan } from './preflight';
import { errorBody, printError } from './errors';
import { ConfigError } from '../breaker/config-error';

interface SeedOptions {
  sources: string;
  source: string;
  bbox?: string;
  coverage?: string;
  crs?: string;
  levels: string;
  into: string;
  fallback?: MosaicRequest['fallback'];
  afterDeadline?: MosaicRequest['afterDeadline'];
  deadline?: string;
  store?: string;
  refreshBefore?: string;
  maxTiles?: string;
  id?: string;
  json?: boolean;
  sourcesOnWorker?: boolean;
  schedule?: string;
  scheduleId?: string;
  timezone?: string;
}

/** A seed request from the flags; the worker validates the rest as it does a mosaic's. */
export function seedRequestFromOptions(o: SeedOptions): SeedRequest {
  const levels = /^(\d+)(?:-(\d+))?$/.exec(o.levels.trim());
  if (!levels)
    throw new ConfigError('seed', [
      `--levels: must be a zoom level or a range such as 10-14 (got ${JSON.stringify(o.levels)})`,
    ]);
  if (o.bbox === undefined && o.coverage === undefined) throw new Error('seed: give --bbox, --coverage, or both');
  const bbox = o.bbox === undefined ? undefined : parseBbox(o.bbox);
  const maxTiles = o.maxTiles === undefined ? undefined : Number(o.maxTiles);
  if (maxTiles !== undefined && !Number.isInteger(maxTiles))
    throw new Error(`--max-tiles: must be a whole number (got ${JSON.stringify(o.maxTiles)})`);
  return {
    sourcesFile: o.sources,
    sourceName: o.source,
    ...(bbox !== undefined ? { bbox } : {}),
    ...(o.coverage !== undefined ? { coverage: readCoverageFile(o.coverage) } : {}),
    ...(o.crs !== undefined ? { crs: o.crs } : {}),
    levels: [Number(levels[1]), Number(levels[2] ?? levels[1])],
    into: o.into,
    ...(o.fallback !== undefined ? { fallback: o.fallback } : {}),
    ...(o.afterDeadline !== undefined ? { afterDeadline: o.afterDeadline } : {}),
    ...(o.deadline !== undefined ? { deadline: o.deadline } : {}),
    ...(o.store !== undefined ? { storeRoot: o.store } : {}),
    ...(o.refreshBefore !== undefined ? { refreshBefore: o.refreshBefore } : {}),
    ...(maxTiles !== undefined ? { maxTiles } : {}),
  };
}

function summary(r: SeedResult): string[] {
  return [
    `seed ${r.into}: ${r.tiles} tiles packed${r.missing > 0 ? ` (${r.missing} gone from the store since their level ended)` : ''}`,
    ...(r.kept ? [`  ${r.kept} of them kept from the earlier file: this run did not serve them`] : []),
    ...(r.earlierNotKept !== undefined ? [`  the earlier file's tiles were not kept: ${r.earlierNotKept}`] : []),
    ...r.levels.map((l) => {
      const c = l.counts;
      return `  ${l.manifest}: ok ${c.ok}/${l.total}, stale ${c.stale}, hole ${c.hole}, dead-lettered ${c['dead-lettered']}, failed ${c.failed}${c.outside ? `, outside the coverage ${c.outside}` : ''}`;
    }),
  ];
}

/**
 * The seed's levels planned here, as `mosaic start` plans its request, before anything starts: a level over
 * maxTiles or outside the source's zoom range is refused at once, not after the levels before it ran; and a
 * source on a grid of its own, whose tiles an MBTiles file cannot hold. The first and the last level suffice:
 * the range lies between them, and the last has the most tiles.
 */
async function preflightSeed(request: SeedRequest, sourcesOnWorker: boolean): Promise<void> {
  const { levels, base } = checkSeedRequest(request);
  const { levels: _levels, into: _into, ...mosaic } = request;
  for (const zoom of new Set([levels[0]!, levels.at(-1)!])) {
    const plan = await preflightPlan(
      { ...mosaic, zoom, output: `${base}.z${zoom}.tif`, image: false },
      { sourcesOnWorker },
    );
    if (plan === null) return;
    if (plan.bounds.crs !== undefined) {
      throw new ConfigError('seed', [
        `--into: an MBTiles file holds Web Mercator tiles; the source ${JSON.stringify(plan.sourceName)} is on a grid in ${plan.bounds.crs}`,
      ]);
    }
  }
}

/** `tilebreaker seed`: a tile cache over zoom levels into an MBTiles file, now or (--schedule) on a cron spec. */
export function registerSeedCommand(program: Command, runners: ClientRunners): void {
  const cmd = program
    .command('seed')
    .description(
      'fill a tile cache over a range of zoom levels into an MBTiles file, each level through the fleet-wide breaker as a mosaic without an image (exit codes as mosaic start --wait)',
    )
    .requiredOption('--sources <file>', 'the sources file')
    .requiredOption('--source <name>', 'which source in the sources file');
  addAreaOptions(cmd)
    .requiredOption('--levels <a-b>', 'zoom levels, e.g. 10-14 (both included) or 12')
    .requiredOption(
      '--into <file.mbtiles>',
      'the MBTiles file to write, a path or an s3:// URL; each level leaves <file>.z<level>.manifest.json and .mask.png beside it',
    );
  addFallbackOptions(cmd)
    .option('--store <dir>', 'tile store folder or s3:// prefix (default <into minus .mbtiles>.tiles)')
    .option(
      '--refresh-before <age|instant>',
      'refresh mode: keep stored tiles fetched within this age (7d, 12h) or since this ISO instant; fetch only older ones, with If-None-Match / If-Modified-Since',
    )
    .option('--max-tiles <n>', 'refuse a level larger than this (default 100000)')
    .option('--id <workflowId>', 'workflow id (default seed/<name>-<hash of the file>)')
    .option('--sources-on-worker', 'the sources file exists on the workers only: skip the check of every level here')
    .option(
      '--schedule <cron>',
      'do not seed now: create a Temporal Schedule that runs this seed on the cron spec (e.g. "0 3 * * 0"), one run at a time',
    )
    .option(
      '--schedule-id <id>',
      'the schedule id (default seed-<into base name>); `schedule list` and `schedule delete` take it',
    )
    .option('--timezone <tz>', 'IANA time zone for --schedule (default UTC)')
    .option('--json', 'print the result as JSON')
    .action((o: SeedOptions) => seedAction(o, runners));
}

async function seedAction(o: SeedOptions, { withLocal, withClient }: ClientRunners): Promise<void> {
  const request = seedRequestFromOptions(o);
  if (o.schedule === undefined && (o.scheduleId !== undefined || o.timezone !== undefined))
    throw new Error('--schedule-id and --timezone go with --schedule');
  // A seed that fails tonight would fail every night: refused now, as a seed started by hand is.
  await preflightSeed(request, !!o.sourcesOnWorker);
  if (o.schedule !== undefined) await scheduleSeed(o, o.schedule, request, withClient);
  else await withLocal(({ client, taskQueue }) => runSeed(client, taskQueue, o, request));
}

/** `seed --schedule`: creates the schedule that runs the seed. */
async function scheduleSeed(o: SeedOptions, cron: string, request: SeedRequest, withClient: WithClient): Promise<void> {
  const id = o.scheduleId ?? `seed-${path.basename(request.into).replace(/\.mbtiles$/i, '')}`;
  await withClient(async ({ client, taskQueue }) => {
    await createSeedSchedule(client, taskQueue, id, cron, request, o.timezone);
    const tz = o.timezone ?? 'UTC';
    console.log(
      o.json
        ? JSON.stringify({ scheduleId: id, cron, timezone: tz, into: request.into })
        : `created schedule ${id}: seed levels ${request.levels.join('-')} into ${request.into}, "${cron}" (${tz})`,
    );
  });
}

/** Starts the seed and waits for its result (through server outages), printing it and setting the exit code. */
async function runSeed(client: Client, taskQueue: string, o: SeedOptions, request: SeedRequest): Promise<void> {
  const handle = await startSeed(client, taskQueue, request, o.id);
  if (!o.json)
    console.error(`started seed ${handle.workflowId}: levels ${request.levels.join('-')} into ${request.into}`);
  try {
    const result = await throughOutages(() => handle.result(), { ...outageLines(), what: handle.workflowId });
    if (o.json) console.log(JSON.stringify({ workflowId: handle.workflowId, result }));
    else for (const line of summary(result)) console.log(line);
    if (!o.json && result.notStarted.length > 0)
      console.error(`levels ${result.notStarted.join(', ')} not seeded: the deadline passed first`);
    process.exitCode = seedExitCode(result);
  } catch (err) {
    // Gave up on an unreachable server: the seed was not seen to fail, so exit 2 as any unreachable server.
    if (err instanceof TemporalUnreachableError) throw err;
    process.exitCode = reportSeedFailure(err, handle.workflowId, !!o.json);
  }
}

/** Says why a seed failed and returns its exit code: EXIT.configError when a level's configuration was refused. */
function reportSeedFailure(err: unknown, workflowId: string, json: boolean): number {
  // The cause that says why: a level's failure is a child's, whose own cause names the field and value.
  const chain: { message: string; type?: string }[] = [];
  for (
    let e: unknown = err instanceof WorkflowFailedError ? err.cause : err;
    e instanceof Error && chain.length < 6;
    e = (e as { cause?: unknown }).cause
  ) {
    const type = (e as Error & { type?: unknown }).type;
    chain.push({ message: e.message, ...(typeof type === 'string' ? { type } : {}) });
  }
  const why = chain.at(-1)?.message ?? String(err);
  const exitCode = chain.some((c) => c.type === 'ConfigError') ? EXIT.configError : EXIT.failed;
  // Under --json, one object on stdout, as every error is (src/cli/errors.ts).
  if (json)
    printError(
      errorBody(new Error(`seed ${workflowId} failed: ${why}`), exitCode, {
        kind: 'failed',
        workflowId,
      }),
      true,
    );
  else console.error(`seed ${workflowId} failed: ${why}`);
  return exitCode;
}
