import { createHash } from 'node:crypto';
import path from 'node:path';
import { WorkflowNotFoundError, type Client, type WorkflowExecutionInfo } from '@temporalio/client';
import { isObjectUrl } from '../messages/locations';
import { defaultMosaicName, isMosaicName } from '../messages/mosaic-names';
import {
  MOSAIC_NAME,
  MOSAIC_PROGRESS,
  MOSAIC_SEARCH_ATTRIBUTES,
  MOSAIC_SOURCE,
  MOSAIC_STATUS,
  MOSAIC_ZOOM,
  type MosaicMemo,
  searchAttributesRegistered,
} from '../messages/search-attributes';

/**
 * Mosaic ids and names. A mosaic's workflow id is derived from its output alone, `mosaic/<base>-<hash>` (the
 * base name and the first 8 hex digits of the SHA-256 of the absolute output path without extension): a run
 * by hand, a schedule's run (started as a child by scheduledMosaicWorkflow) and a re-drive of one output all
 * take that id, so Temporal refuses the second while the first runs, and two outputs with the same base name
 * in different folders get different ids. The name (default the base name) is a
 * label in the memo and the MosaicName search attribute, by which every command finds the mosaic.
 */

export const MOSAIC_WORKFLOW_TYPES = ['mosaicWorkflow', 'redriveMosaicWorkflow'] as const;

/**
 * One spelling per location, so two spellings of one output get one id: a local path absolute and normal
 * (`./out/../out/a.tif` is `<cwd>/out/a.tif`), an object URL's key without empty, `.` or `..` segments. A
 * location already in that form comes back unchanged, so the ids of existing runs and schedules stay.
 */
export function normalLocation(loc: string, cwd = process.cwd()): string {
  if (!isObjectUrl(loc)) return path.resolve(cwd, loc);
  const rest = loc.slice('s3://'.length);
  const slash = rest.indexOf('/');
  if (slash < 0) return loc;
  // Resolved from the bucket's root: a `..` cannot climb out of the bucket.
  const key = path.posix.resolve('/', rest.slice(slash + 1)).slice(1);
  return `s3://${rest.slice(0, slash)}${key ? `/${key}` : ''}`;
}

/** An output, manifest or re-drive path as a key: normal (normalLocation), without `.tif` / `.manifest.json`. */
export function outputKey(file: string): string {
  return normalLocation(file).replace(/\.(manifest\.json|tiff?)$/i, '');
}

function shortHash(file: string): string {
  return createHash('sha256').update(outputKey(file)).digest('hex').slice(0, 8);
}

/** The workflow id of the mosaic of an output: `mosaic/alps-1a2b3c4d` for /tmp/x/alps.tif. */
export function mosaicWorkflowId(output: string): string {
  return `mosaic/${defaultMosaicName(output)}-${shortHash(output)}`;
}

/** The id re-drives had before they took the output's id: still checked, so a running one is never doubled. */
export function redriveWorkflowId(output: string): string {
  return `redrive/${defaultMosaicName(output)}-${shortHash(output)}`;
}

/** The workflow id of the seed into `into`: `seed/alps-1a2b3c4d` for /data/alps.mbtiles (one seed per file at a time). */
export function seedWorkflowId(into: string): string {
  return `seed/${path.basename(into).replace(/\.mbtiles$/i, '')}-${createHash('sha256').update(into).digest('hex').slice(0, 8)}`;
}

/**
 * The seed and zoom an output would be a level of, by its name (`<into minus .mbtiles>.z<level>`): a seed
 * runs that level as its child `<seed id>/z<level>`. Null for a name no seed gives its levels.
 */
export function seedLevelOf(file: string): { into: string; zoom: number } | null {
  const m = /^(.+)\.z(\d{1,2})$/.exec(outputKey(file));
  return m ? { into: `${m[1]!}.mbtiles`, zoom: Number(m[2]) } : null;
}

/** The ids versions before names gave (the absolute path): still checked, so an old run is never doubled. */
export function legacyMosaicWorkflowId(output: string): string {
  return `mosaic/${outputKey(output).replace(/^\/+/, '')}`;
}
export function legacyRedriveWorkflowId(output: string): string {
  return `redrive/${outputKey(output).replace(/^\/+/, '')}`;
}

/** Whether this namespace has the Mosaic* search attributes; no answer (no operator rights) counts as no. */
export async function mosaicAttributesRegistered(client: Client): Promise<boolean> {
  try {
    return await searchAttributesRegistered(
      client.connection.operatorService,
      client.options.namespace,
      MOSAIC_SEARCH_ATTRIBUTES,
    );
  } catch {
    return false;
  }
}

export { startLabels } from '../messages/mosaic-labels';

export interface ListedMosaic {
  name: string;
  workflowId: string;
  runId: string;
  /** mosaicWorkflow or redriveMosaicWorkflow. */
  type: string;
  /** running, completed, partial, failed, cancelled, terminated, timed-out (from the memo or the attribute where the run says more than Temporal). */
  status: string;
  /** Percent of tiles settled, where the run publishes it. */
  progress: number | null;
  source: string | null;
  zoom: number | null;
  output: string | null;
  startTime: string;
  closeTime: string | null;
}

export const LIST_STATUSES = [
  'running',
  'completed',
  'partial',
  'failed',
  'cancelled',
  'terminated',
  'timed-out',
] as const;

const EXECUTION_STATUS: Record<string, string> = {
  running: 'Running',
  completed: 'Completed',
  partial: 'Completed',
  failed: 'Failed',
  cancelled: 'Canceled',
  terminated: 'Terminated',
  'timed-out': 'TimedOut',
};

const q = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const TYPE_CLAUSE = `(${MOSAIC_WORKFLOW_TYPES.map((t) => `WorkflowType = ${q(t)}`).join(' OR ')})`;

export interface MosaicListResult {
  mosaics: ListedMosaic[];
  /** The visibility query sent. */
  query: string;
  /** Where name and status filters were applied: by the server (Mosaic* attributes) or here, from memos. */
  filteredBy: 'search-attributes' | 'memo';
  /** The most runs read (`--limit`, default 1000). */
  limit: number;
  /** The server had more runs than `limit`: the listing stopped there (the newest `limit` are read; raise the limit for the rest). */
  more: boolean;
}

/**
 * Mosaics and re-drives by visibility query (eventually consistent: one started a moment ago may not be
 * listed yet), newest first. With the Mosaic* attributes registered the server filters; without, the list is
 * by workflow type and the filters read the memos.
 */
export async function listMosaics(
  client: Client,
  opts: { status?: string; name?: string; limit?: number } = {},
): Promise<MosaicListResult> {
  if (opts.status !== undefined && !(LIST_STATUSES as readonly string[]).includes(opts.status)) {
    throw new Error(`--status: must be one of ${LIST_STATUSES.join(', ')} (got ${JSON.stringify(opts.status)})`);
  }
  if (opts.name !== undefined && !isMosaicName(opts.name))
    throw new Error(`name: not a mosaic name (got ${JSON.stringify(opts.name)})`);
  const base = opts.status ? `${TYPE_CLAUSE} AND ExecutionStatus = ${q(EXECUTION_STATUS[opts.status]!)}` : TYPE_CLAUSE;
  const keep = (m: ListedMosaic) =>
    (opts.status === undefined || m.status === opts.status) && (opts.name === undefined || m.name === opts.name);
  const limit = opts.limit ?? 1000;
  if (await mosaicAttributesRegistered(client)) {
    const clauses = [base];
    if (opts.status === 'completed' || opts.status === 'partial') clauses.push(`MosaicStatus = ${q(opts.status)}`);
    if (opts.name !== undefined) clauses.push(`MosaicName = ${q(opts.name)}`);
    const query = clauses.join(' AND ');
    // Runs started before the attributes existed have no MosaicName: the server's filter misses them, as it should.
    const { runs, more } = await collect(client, query, limit);
    return { mosaics: runs.filter(keep), query, filteredBy: 'search-attributes', limit, more };
  }
  const { runs, more } = await collect(client, base, limit);
  return { mosaics: runs.filter(keep), query: base, filteredBy: 'memo', limit, more };
}

/** At most `limit` runs, and whether the server had more (one more is read to know). */
async function collect(client: Client, query: string, limit: number): Promise<{ runs: ListedMosaic[]; more: boolean }> {
  const out: ListedMosaic[] = [];
  for await (const wf of client.workflow.list({ query })) {
    // A long wait's earlier runs handed over to a newer one (continue-as-new): the newest run is the mosaic.
    if (wf.status.name === 'CONTINUED_AS_NEW') continue;
    out.push(listed(wf));
    if (out.length > limit) break;
  }
  const more = out.length > limit;
  return { runs: out.slice(0, limit).sort((a, b) => b.startTime.localeCompare(a.startTime)), more };
}

export function listed(wf: WorkflowExecutionInfo): ListedMosaic {
  const memo = (wf.memo ?? {}) as MosaicMemo;
  const attr = wf.typedSearchAttributes;
  const exec = wf.status.name;
  const told = attr.get(MOSAIC_STATUS) ?? memo.status;
  // Temporal's status wins, except to say how a completed run ended; a terminated run never said so itself.
  const status =
    exec === 'RUNNING'
      ? 'running'
      : exec === 'COMPLETED'
        ? told === 'partial'
          ? 'partial'
          : 'completed'
        : exec === 'CANCELLED'
          ? 'cancelled'
          : exec === 'TIMED_OUT'
            ? 'timed-out'
            : exec.toLowerCase();
  const output = typeof memo.output === 'string' ? memo.output : null;
  return {
    name: attr.get(MOSAIC_NAME) ?? (typeof memo.name === 'string' ? memo.name : nameFromId(wf.workflowId)),
    workflowId: wf.workflowId,
    runId: wf.runId,
    type: wf.type,
    status,
    progress:
      attr.get(MOSAIC_PROGRESS) ??
      (typeof memo.progress === 'number' ? memo.progress : exec === 'COMPLETED' ? 100 : null),
    source: attr.get(MOSAIC_SOURCE) ?? (typeof memo.source === 'string' ? memo.source : null),
    zoom: attr.get(MOSAIC_ZOOM) ?? (typeof memo.zoom === 'number' ? memo.zoom : null),
    output,
    startTime: wf.startTime.toISOString(),
    closeTime: wf.closeTime ? wf.closeTime.toISOString() : null,
  };
}

/** A run started before names: its name is its id's last path segment. */
function nameFromId(id: string): string {
  return defaultMosaicName(id.replace(/^(mosaic|redrive|mosaic-schedule)\//, ''));
}

/**
 * The workflow id a person means by `ref`: a workflow id as it is (new, old path-style, a re-drive's, a
 * schedule's), or a mosaic name (`alps`, or `mosaic/alps` as older docs wrote it). A name means the run of
 * that name still running, else the latest; two running under one name is ambiguous, and says which.
 */
export async function resolveMosaicId(client: Client, ref: string): Promise<string> {
  const exists = await client.workflow
    .getHandle(ref)
    .describe()
    .then(() => true)
    .catch((err: unknown) => {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    });
  if (exists) return ref;
  const name = ref.replace(/^mosaic\//, '');
  if (!isMosaicName(name)) throw new Error(`no mosaic with id ${JSON.stringify(ref)} (and it is not a mosaic name)`);
  const { mosaics } = await listMosaics(client, { name });
  const running = mosaics.filter((m) => m.status === 'running');
  if (running.length > 1) {
    throw new Error(
      `mosaic name ${JSON.stringify(name)} is ambiguous: ${running.length} running (${running.map((m) => `${m.workflowId} -> ${m.output ?? '?'}`).join(', ')}); give the id`,
    );
  }
  const pick = running[0] ?? mosaics[0];
  if (!pick)
    throw new Error(
      `no mosaic with id or name ${JSON.stringify(ref)} (a mosaic started a moment ago may take a second to be found by name)`,
    );
  return pick.workflowId;
}
