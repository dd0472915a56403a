import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { SingleBar } from 'cli-progress';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { breakerWorkflowId } from '../breaker';
import { parseDuration } from './duration-option';
import { parseBbox, readCoverageFile } from './area-options';
import { preflight } from './preflight';
import { printError } from './errors';
import { listJson } from './format';
import { LIST_STATUSES, listMosaics, resolveMosaicId, type ListedMosaic } from '../client/mosaic-names';
import { checkMosaicName, defaultMosaicName } from '../messages/mosaic-names';
import { DEFAULT_BATCH_SIZE } from '../messages/mosaic-request';
import { checkScheduleOverlap, SCHEDULE_OVERLAPS } from '../messages/scheduled-mosaic';
import {
  cancelMosaic,
  exitCodeFor,
  liveCounts,
  mosaicStatus,
  startMosaic,
  startRedrive,
  watchMosaic,
  type MosaicStatus,
} from '../client/mosaics';
import { temporalUnreachable, throughOutages, type OutageOptions } from '../client/server-wait';
import { createMosaicSchedule, deleteSchedule, listSchedules } from '../client/schedules';
import { viewQuery } from '../messages/breaker';
import type { MosaicProgress, MosaicRequest, MosaicResult } from '../messages/mosaic-types';
import type { MosaicMemo } from '../messages/search-attributes';

const noop = () => undefined;

export type WithClient = (fn: (ctx: { client: Client; taskQueue: string }) => Promise<void>) => Promise<void>;

interface StartOptions {
  request?: string;
  sources?: string;
  sourcesOnWorker?: boolean;
  source?: string;
  bbox?: string;
  coverage?: string;
  crs?: string;
  zoom?: string;
  out?: string;
  format?: string;
  /** false with --no-sidecars (commander gives true otherwise). */
  sidecars?: boolean;
  fallback?: MosaicRequest['fallback'];
  afterDeadline?: MosaicRequest['afterDeadline'];
  deadline?: string;
  maxTiles?: string;
  store?: string;
  refreshBefore?: string;
  batchSize?: string;
  blockTiles?: string;
  parallelBatches?: string;
  breaker?: boolean;
  id?: string;
  name?: string;
  wait?: boolean;
  watch?: boolean;
  json?: boolean;
}

function readRequestFile(file: string): Partial<MosaicRequest> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`request file ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return (/\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text)) as Partial<MosaicRequest>;
  } catch (err) {
    // The user's own file: the parser's message (and its line) goes with the file's name.
    throw new Error(
      `request file ${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

const num = (flag: string, v: string | undefined) => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${flag}: must be a number (got ${JSON.stringify(v)})`);
  return n;
};

/** A request from a file and/or flags (flags win); validation proper is the planner's. */
export function requestFromOptions(o: StartOptions): MosaicRequest {
  const base: Partial<MosaicRequest> = o.request ? readRequestFile(o.request) : {};
  const bbox = o.bbox === undefined ? undefined : parseBbox(o.bbox);
  const r: Record<string, unknown> = {
    ...base,
    ...(o.sources !== undefined ? { sourcesFile: o.sources } : {}),
    ...(o.source !== undefined ? { sourceName: o.source } : {}),
    ...(bbox ? { bbox } : {}),
    ...(o.coverage !== undefined ? { coverage: readCoverageFile(o.coverage) } : {}),
    ...(o.crs !== undefined ? { crs: o.crs } : {}),
    ...(o.zoom !== undefined ? { zoom: num('--zoom', o.zoom) } : {}),
    ...(o.out !== undefined ? { output: o.out } : {}),
    ...(o.format !== undefined
      ? {
          extraFormats: o.format
            .split(',')
            .map((f) => f.trim())
            .filter(Boolean),
        }
      : {}),
    ...(o.sidecars === false ? { sidecars: false } : {}),
    ...(o.fallback !== undefined ? { fallback: o.fallback } : {}),
    ...(o.afterDeadline !== undefined ? { afterDeadline: o.afterDeadline } : {}),
    ...(o.deadline !== undefined ? { deadline: o.deadline } : {}),
    ...(o.maxTiles !== undefined ? { maxTiles: num('--max-tiles', o.maxTiles) } : {}),
    ...(o.store !== undefined ? { storeRoot: o.store } : {}),
    ...(o.refreshBefore !== undefined ? { refreshBefore: o.refreshBefore } : {}),
    ...(o.batchSize !== undefined ? { batchSize: num('--batch-size', o.batchSize) } : {}),
    ...(o.blockTiles !== undefined ? { blockTiles: num('--block-tiles', o.blockTiles) } : {}),
    ...(o.parallelBatches !== undefined ? { parallelBatches: num('--parallel-batches', o.parallelBatches) } : {}),
    ...(o.breaker === false ? { breaker: false } : {}),
  };
  if (r['output'] === undefined) throw new Error('mosaic start: give --out PATH.tif (or output in --request)');
  return r as unknown as MosaicRequest;
}

/** Where a request's sourcesFile came from, for messages: the flag wins over the request file. */
function sourcesFrom(o: Pick<StartOptions, 'sources' | 'request'>): string {
  return o.sources === undefined && o.request !== undefined ? `sourcesFile in --request ${o.request}` : '--sources';
}

export function summaryLine(result: MosaicResult): string {
  const c = result.counts;
  return `${result.total} tiles: ok ${c.ok}, stale ${c.stale}, hole ${c.hole}, dead-lettered ${c['dead-lettered']}, failed ${c.failed}${c.outside ? `, outside the coverage ${c.outside}` : ''}${result.partial ? ' (partial)' : ''}`;
}

function printResult(result: MosaicResult, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(summaryLine(result));
  if (result.configError !== undefined) console.log(`  ${result.configError}`);
  if (result.earlierCopies)
    console.log(
      `  ${result.earlierCopies} of the gaps drawn from their last good copy in the tile store (mask: stale; a re-drive fetches them)`,
    );
  for (const f of result.files) console.log(`  ${f}`);
}

/** Live breaker states of the mosaic's breakers, as `key=state`. */
async function breakerLine(client: Client, keys: string[]): Promise<string> {
  const parts = await Promise.all(
    keys.map(async (k) => {
      const v = await client.workflow
        .getHandle(breakerWorkflowId(k))
        .query(viewQuery)
        .catch(() => null);
      return `${k} ${v ? v.state : 'no entity (closed)'}`;
    }),
  );
  return parts.join(', ') || 'no breaker';
}

/**
 * What a `wait` pass is waiting for, as one line that names each time it gives: `waiting for breaker <key>
 * (<state>): next try in N s; gives up at <deadline>` (the wait's deadline: past it, tiles still refused get
 * the after-deadline fallback, or stay dead-lettered in a re-drive), or null when it is not waiting on a breaker.
 */
export function waitingLine(p: Pick<MosaicProgress, 'waitingFor' | 'waitingUntil'>, now: number): string | null {
  const w = p.waitingFor;
  if (!w) return null;
  const next =
    p.waitingUntil !== null ? `next try in ${Math.max(0, Math.round((p.waitingUntil - now) / 1000))} s` : null;
  const deadline = w.deadlineAt !== null ? `gives up at ${new Date(w.deadlineAt).toISOString()}` : null;
  const times = [next, deadline].filter((t) => t !== null).join('; ');
  return `waiting for breaker ${w.key} (${w.state})${times ? `: ${times}` : ''}`;
}

/** The progress bar's phase: while a wait sleeps, when its next try is (the wait's deadline is waitingLine's). */
export function barPhase(p: Pick<MosaicProgress, 'phase' | 'waitingUntil'>): string {
  return p.waitingUntil
    ? `waiting for the breaker, next try at ${new Date(p.waitingUntil).toISOString().slice(11, 19)}Z`
    : p.phase;
}

/**
 * The waiting lines worth printing, one status read after another: a line when what is waited for changes
 * (breaker, state, deadline), not with every read nor every 1 s retry of a long outage; once tiles have been
 * settled since, a wait is news again.
 */
export function waitingLines(): (
  p: Pick<MosaicProgress, 'waitingFor' | 'waitingUntil' | 'done'>,
  now: number,
) => string | null {
  let last: string | null = null;
  let lastDone = -1;
  return (p, now) => {
    if (p.done !== lastDone) [lastDone, last] = [p.done, null];
    const w = p.waitingFor;
    const what = w ? JSON.stringify([w.key, w.state, w.deadlineAt]) : null;
    if (what === null || what === last) return null;
    last = what;
    return waitingLine(p, now);
  };
}

/** Shows a progress bar with counts by status and the breakers' states until the mosaic ends. */
/** A watch goes on through a server restart, saying so on `stream` (stderr): docs/cli.md. */
export function outageLines(stream: NodeJS.WritableStream = process.stderr): Omit<OutageOptions, 'what'> {
  return { say: (line) => void stream.write(`tilebreaker: ${line}\n`) };
}

export async function showMosaicProgress(
  client: Client,
  workflowId: string,
  opts: { intervalMs?: number; stream?: NodeJS.WriteStream } = {},
): Promise<MosaicStatus> {
  const stream = opts.stream ?? process.stderr;
  const bar = new SingleBar({
    format:
      '{bar} {value}/{total} | ok {ok} stale {stale} hole {hole} dead {dead} failed {failed} | {phase} | breaker {breaker} | ETA {etaText}',
    stream,
    hideCursor: true,
    noTTYOutput: true,
    notTTYSchedule: 5_000,
    barsize: 24,
  });
  let started = false;
  const waitingNews = waitingLines();
  const onStatus = async (s: MosaicStatus) => {
    const p: MosaicProgress | null = liveCounts(s);
    const line = p && waitingNews(p, Date.now());
    // On a terminal, the line goes over the bar's (redrawn on its next update).
    if (line) stream.write(`${stream.isTTY ? '\r\x1b[2K' : ''}${line}\n`);
    if (p) {
      const payload = {
        ok: p.counts.ok,
        stale: p.counts.stale,
        hole: p.counts.hole,
        dead: p.counts['dead-lettered'],
        failed: p.counts.failed,
        phase: barPhase(p),
        breaker: await breakerLine(client, p.breakerKeys),
        etaText: p.etaSeconds === null ? '-' : `${p.etaSeconds}s`,
      };
      if (!started) {
        bar.start(Math.max(1, p.total), p.done, payload);
        started = true;
      } else {
        bar.setTotal(Math.max(1, p.total));
        bar.update(p.done, payload);
      }
    }
    if (s.status !== 'RUNNING' && started) bar.stop();
  };
  return watchMosaic(client, workflowId, {
    onStatus,
    outages: outageLines(stream),
    ...(opts.intervalMs !== undefined ? { intervalMs: opts.intervalMs } : {}),
  });
}

function finish(s: MosaicStatus, json: boolean): number {
  if (s.result) {
    printResult(s.result, json);
    return exitCodeFor(s.result);
  }
  // Refused at planning (the request, or the sources file as the worker read it): it could not run, exit 2,
  // which under --json is an error object as every other exit 2 is.
  const refused = s.status !== 'RUNNING' && s.failureType === 'ConfigError';
  if (json && refused)
    printError(
      {
        message: `mosaic ${s.workflowId}: ${s.failure ?? s.status}`,
        kind: 'invalid',
        exitCode: 2,
        workflowId: s.workflowId,
      },
      true,
    );
  else if (json) console.log(JSON.stringify(s, null, 2));
  else console.log(`mosaic ${s.workflowId}: ${s.status}${s.failure ? `: ${s.failure}` : ''}`);
  if (s.status === 'RUNNING') return 0;
  return refused ? 2 : 1;
}

export function registerMosaicCommands(
  program: Command,
  { withClient, withLocal }: { withClient: WithClient; withLocal: WithClient },
): void {
  const mosaic = program
    .command('mosaic')
    .description(
      'build, follow and re-drive mosaics (exit codes: 0 every tile ok, 3 done with gaps, 4 configuration error, 1 failed or cancelled, 2 could not run)',
    );

  mosaic
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
    .option('--source <name>', 'which source in the sources file')
    .option('--bbox <w,s,e,n>', 'area: west,south,east,north (default: the bounds of --coverage)')
    .option(
      '--coverage <file.geojson>',
      'only the tiles overlapping this GeoJSON (Multi)Polygon, Feature or FeatureCollection, in --crs; read here and sent with the request',
    )
    .option(
      '--crs <crs>',
      'crs of --bbox: EPSG:4326 (lon/lat, default), EPSG:3857, or the CRS of the source grid (e.g. EPSG:2056)',
    )
    .option('--zoom <z>', 'zoom level')
    .option('--out <path.tif>', 'output GeoTIFF; manifest, mask and sidecars go beside it')
    .option('--format <list>', 'also write png and/or webp, e.g. png,webp')
    .option(
      '--no-sidecars',
      "no .aux.xml, world file or .prj beside the GeoTIFF (its georeferencing is inside it; the png/webp copies and the mask keep theirs, and a copy's .prj shares the GeoTIFF's stem)",
    )
    .option('--fallback <policy>', 'when the breaker refuses a tile: fail-fast | stale | hole | wait')
    .option('--after-deadline <policy>', 'for wait, after the deadline: fail-fast | stale | hole')
    .option('--deadline <when>', 'ISO instant or duration from the start (90m, 2h)')
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
    .action(async (o: StartOptions) => {
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
        const ride = { ...outageLines(), what: handle.workflowId };
        // The run's end, however it ended; only an unreachable server is retried, not a failed run.
        const ended = () =>
          handle.result().then(noop, (err: unknown) => {
            if (temporalUnreachable(err)) throw err;
          });
        const s = o.watch
          ? await showMosaicProgress(client, handle.workflowId)
          : await throughOutages(ended, ride).then(() =>
              throughOutages(() => mosaicStatus(client, handle.workflowId), ride),
            );
        process.exitCode = finish(s, !!o.json);
      });
    });

  mosaic
    .command('status')
    .description("a mosaic's state, progress by status, breakers involved, and its result when done")
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const id = await resolveMosaicId(client, ref);
        const s = await mosaicStatus(client, id);
        if (o.json) {
          console.log(JSON.stringify({ ...s, live: liveCounts(s) }, null, 2));
        } else {
          const p = liveCounts(s);
          console.log(`mosaic ${id}: ${s.status}${s.failure ? `: ${s.failure}` : ''}`);
          if (p) {
            const c = p.counts;
            console.log(
              `  ${p.phase}: ${p.done}/${p.total} (ok ${c.ok}, stale ${c.stale}, hole ${c.hole}, dead-lettered ${c['dead-lettered']}, failed ${c.failed}${c.outside ? `, outside ${c.outside}` : ''}), ETA ${p.etaSeconds ?? '-'} s`,
            );
            console.log(`  breakers: ${await breakerLine(client, p.breakerKeys)}`);
            const waiting = waitingLine(p, Date.now());
            if (waiting) console.log(`  ${waiting}`);
          }
          if (s.result) printResult(s.result, false);
        }
        process.exitCode = s.result ? exitCodeFor(s.result) : s.status === 'RUNNING' ? 0 : 1;
      });
    });

  mosaic
    .command('watch')
    .description('a live progress bar (counts by status, breaker states) until the mosaic ends')
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print the final state as JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        process.exitCode = finish(await showMosaicProgress(client, await resolveMosaicId(client, ref)), !!o.json);
      });
    });

  mosaic
    .command('cancel')
    .description(
      'cancel a mosaic: once planned, it stops fetching and writes a partial manifest accounting for every tile; while planning, it ends with none',
    )
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const id = await resolveMosaicId(client, ref);
        const s = await cancelMosaic(client, id);
        const report = cancelReport(id, s);
        if (o.json) console.log(JSON.stringify({ ...s, ...report }, null, 2));
        else console.log(report.message);
      });
    });

  mosaic
    .command('list')
    .description(
      'mosaics and re-drives, newest first: name, status, progress, source, zoom, start time (a visibility query)',
    )
    .option('--status <status>', `only these: ${LIST_STATUSES.join(' | ')}`)
    .option('--name <name>', 'only mosaics of this name')
    .option('--limit <n>', 'at most this many (default 1000)')
    .option('--json', 'print JSON')
    .action(async (o: { status?: string; name?: string; limit?: string; json?: boolean }) => {
      const limit = o.limit === undefined ? undefined : num('--limit', o.limit);
      if (limit !== undefined && !(Number.isInteger(limit) && limit > 0))
        throw new Error(`--limit: must be a positive whole number (got ${JSON.stringify(o.limit)})`);
      await withClient(async ({ client }) => {
        const r = await listMosaics(client, {
          ...(o.status !== undefined ? { status: o.status } : {}),
          ...(o.name !== undefined ? { name: o.name } : {}),
          ...(limit !== undefined ? { limit } : {}),
        });
        if (o.json)
          console.log(listJson(r.mosaics, { more: r.more, limit: r.limit, query: r.query, filteredBy: r.filteredBy }));
        else {
          console.log(mosaicTable(r.mosaics));
          if (r.more)
            console.log(
              `(stopped at --limit ${r.limit}: the server has more runs than listed here; raise --limit to see them)`,
            );
        }
      });
    });

  mosaic
    .command('redrive')
    .description(
      "fetch only a mosaic's dead-lettered tiles, waiting (--wait-for) for the breaker to let them through, and rebuild it and its manifest",
    )
    .argument('<mosaic>', "the mosaic's manifest (.manifest.json), output (.tif), name or workflow id")
    .option(
      '--id <workflowId>',
      "workflow id (default the output's, mosaic/<base name>-<hash of the output path>: no re-drive while the mosaic or another re-drive of it runs)",
    )
    .option(
      '--sources <file>',
      'read the source from this sources file as it is now (a fixed URL or credential) instead of the one the mosaic was planned with',
    )
    .option('--name <source>', 'the source in --sources (when it has more than one)')
    .option('--source <name>', 'the same as --name (as mosaic start spells it)')
    .option(
      '--wait-for <duration>',
      'wait this long for the breaker to let the tiles through (e.g. 90s, 10m, 1h; default 30m); tiles still refused then stay dead-lettered',
      parseDuration,
    )
    .option(
      '--replace-mirrors',
      "also fetch the tiles its source's mirrors served from the source again (a tile the source still refuses keeps the mirror's)",
    )
    .option('--wait', 'wait for the result and exit with its code (the default)')
    .option('--no-wait', 'start it and return')
    .option('--json', 'print JSON')
    .action(
      async (
        manifest: string,
        opts: {
          id?: string;
          sources?: string;
          name?: string;
          source?: string;
          waitFor?: number;
          replaceMirrors?: boolean;
          wait?: boolean;
          json?: boolean;
        },
      ) => {
        const o = { ...opts, name: opts.name ?? opts.source };
        if (o.name !== undefined && o.sources === undefined)
          throw new Error(`--name ${JSON.stringify(o.name)}: give --sources FILE as well`);
        await withClient(async ({ client, taskQueue }) => {
          const sources =
            o.sources !== undefined
              ? { sourcesFile: o.sources, ...(o.name !== undefined ? { sourceName: o.name } : {}) }
              : undefined;
          const target = await redriveTarget(client, manifest);
          const id = await startRedrive(client, taskQueue, target, o.id, sources, {
            ...(o.waitFor !== undefined ? { waitForMs: o.waitFor } : {}),
            ...(o.replaceMirrors ? { replaceMirrors: true } : {}),
          });
          if (o.wait === false) {
            console.log(o.json ? JSON.stringify({ workflowId: id }) : `started re-drive ${id}`);
            return;
          }
          process.exitCode = finish(await showMosaicProgress(client, id), !!o.json);
        });
      },
    );

  const schedule = program
    .command('schedule')
    .description(
      'nightly mosaics as Temporal Schedules (one run of an output at a time; overlap policy: skip by default)',
    );
  schedule
    .command('create')
    .description('create a schedule that starts a mosaic on a cron spec')
    .argument('<scheduleId>')
    .requiredOption('--cron <expr>', 'cron expression, e.g. "0 2 * * *" for 02:00 every night')
    .requiredOption('--request <file>', 'the mosaic request (YAML or JSON)')
    .option('--timezone <tz>', 'IANA time zone for the cron spec (default UTC)')
    .option('--name <name>', "the mosaics' name (default: the output's base name)")
    .option(
      '--overlap <policy>',
      `when the output is already being built (by this schedule, another, by hand or a re-drive): ${SCHEDULE_OVERLAPS.join(' | ')} (default skip: the run ends, naming the running one; buffer-*: it waits for it; allow-all: it fails)`,
    )
    .option(
      '--sources-on-worker',
      "the request's sourcesFile exists only on the workers (its path as they see it, or relative to their first sources root): not read here, the workers check it each night",
    )
    .option('--json', 'print JSON')
    .action(
      async (
        id: string,
        o: {
          cron: string;
          request: string;
          timezone?: string;
          name?: string;
          overlap?: string;
          sourcesOnWorker?: boolean;
          json?: boolean;
        },
      ) => {
        if (o.name !== undefined) checkMosaicName(o.name, '--name');
        const overlap = checkScheduleOverlap(o.overlap ?? 'skip', '--overlap');
        const request = requestFromOptions({ request: o.request });
        // A request that fails tonight would fail every night: refused now.
        await preflight(request, {
          sourcesOnWorker: !!o.sourcesOnWorker,
          sourcesFrom: `sourcesFile in --request ${o.request}`,
        });
        await withClient(async ({ client, taskQueue }) => {
          await createMosaicSchedule(client, taskQueue, id, o.cron, request, o.timezone, {
            overlap,
            ...(o.name !== undefined ? { name: o.name } : {}),
          });
          console.log(
            o.json
              ? JSON.stringify({
                  scheduleId: id,
                  name: o.name ?? defaultMosaicName(request.output),
                  cron: o.cron,
                  timezone: o.timezone ?? 'UTC',
                  overlap,
                })
              : `created schedule ${id}: "${o.cron}"${o.timezone ? ` (${o.timezone})` : ' (UTC)'}, overlap ${overlap}`,
          );
        });
      },
    );
  schedule
    .command('list')
    .description('list schedules with their next runs')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const all = await listSchedules(client);
        if (o.json) console.log(listJson(all));
        else if (all.length === 0) console.log('no schedules');
        else
          for (const s of all) {
            // Made by an earlier version: its runs start mosaics under ids of their own, beside other runs of the output.
            const old =
              s.workflowType === 'mosaicWorkflow'
                ? '  (made before one run per output: delete and create it again)'
                : '';
            const seed = s.workflowType === 'scheduledSeedWorkflow' ? '  (seed)' : '';
            console.log(
              `${s.scheduleId}  ${s.cron.join(' ')} (${s.timezone})  ${s.paused ? 'paused' : 'active'}  next ${s.nextRuns[0] ?? '-'}${seed}${old}`,
            );
          }
      });
    });
  schedule
    .command('delete')
    .description('delete a schedule, of mosaics or of a seed (running mosaics or seeds it started go on)')
    .argument('<scheduleId>')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        await deleteSchedule(client, id);
        console.log(o.json ? JSON.stringify({ scheduleId: id, deleted: true }) : `deleted schedule ${id}`);
      });
    });
}

/**
 * What a `mosaic cancel` did, as it happened: `manifest` is what the run left beside its output. `final`: it
 * completed (the cancel came after every tile was fetched: assembly is not cancelled); `partial`: it was
 * planned and stopped fetching (the workflow writes a partial manifest accounting for every tile); `none`: it
 * ended before its plan was made (a plan refused, or a cancel while planning) or while assembling, and wrote
 * no manifest; `unknown`: the run answered no progress query.
 */
export function cancelReport(
  id: string,
  s: MosaicStatus & { wasRunning: boolean },
): { manifest: 'final' | 'partial' | 'none' | 'unknown'; message: string } {
  const p = s.progress;
  const how = `${s.status}${s.failure ? `: ${s.failure}` : ''}`;
  const before = s.wasRunning ? '' : `had already ended before this cancel (${how}); the cancel changed nothing. `;
  if (s.result) {
    return {
      manifest: 'final',
      message: `mosaic ${id}: ${before || 'completed before the cancel took effect (every tile was fetched; assembly is not cancelled). '}${summaryLine(s.result)}`,
    };
  }
  if (s.status === 'RUNNING')
    return {
      manifest: 'unknown',
      message: `mosaic ${id}: cancel sent; it is still running (it stops at its next workflow task)`,
    };
  const head = `mosaic ${id}: ${before || `${how}. `}`;
  if (!p)
    return {
      manifest: 'unknown',
      message: `${head}It answered no progress query, so whether it wrote a partial manifest is not known.`,
    };
  if (p.total === 0)
    return {
      manifest: 'none',
      message: `${head}It ended while planning, before any tile was fetched: no manifest was written.`,
    };
  if (p.phase === 'cancelled' || p.phase === 'failed') {
    return {
      manifest: 'partial',
      message: `${head}It stopped after ${p.done}/${p.total} tiles; its partial manifest beside the output accounts for every tile.`,
    };
  }
  return {
    manifest: 'none',
    message: `${head}It ended while ${p.phase} (${p.done}/${p.total} tiles settled) without writing a partial manifest.`,
  };
}

/** `mosaic list` as a table. */
export function mosaicTable(mosaics: ListedMosaic[]): string {
  if (mosaics.length === 0) return 'no mosaics';
  const rows = [
    ['NAME', 'STATUS', 'PROGRESS', 'SOURCE', 'ZOOM', 'STARTED', 'ID'],
    ...mosaics.map((m) => [
      m.type === 'redriveMosaicWorkflow' ? `${m.name} (re-drive)` : m.name,
      m.status,
      m.progress === null ? '-' : `${m.progress}%`,
      m.source ?? '-',
      m.zoom === null ? '-' : String(m.zoom),
      m.startTime.slice(0, 19).replace('T', ' '),
      m.workflowId,
    ]),
  ];
  const widths = rows[0]!.map((_, k) => Math.max(...rows.map((r) => r[k]!.length)));
  return rows.map((r) => r.map((c, k) => (k === r.length - 1 ? c : c.padEnd(widths[k]!))).join('  ')).join('\n');
}

/**
 * What `mosaic redrive` re-drives: a path as given, or, for a name or workflow id, the output its mosaic's
 * memo names.
 */
async function redriveTarget(client: Client, ref: string): Promise<string> {
  if (existsSync(ref) || /\.(tiff?|json)$/i.test(ref) || (ref.includes(path.sep) && !/^(mosaic|redrive)\//.test(ref)))
    return ref;
  const id = await resolveMosaicId(client, ref);
  const desc = await client.workflow.getHandle(id).describe();
  const output = (desc.memo as MosaicMemo | undefined)?.output;
  if (typeof output !== 'string')
    throw new Error(`mosaic ${id}: its memo names no output (a run from before names); give its manifest path instead`);
  return output;
}
