import type { Command } from 'commander';
import { LIST_STATUSES, listMosaics, type ListedMosaic } from '../../client/mosaic-names';
import { listJson } from '../format';
import type { WithClient } from '../runners';
import { numberOption } from './request';

interface ListOptions {
  status?: string;
  name?: string;
  limit?: string;
  json?: boolean;
}

/** `mosaic list`: mosaics and re-drives, newest first. */
export function registerMosaicList(mosaic: Command, withClient: WithClient): void {
  mosaic
    .command('list')
    .description(
      'mosaics and re-drives, newest first: name, status, progress, source, zoom, start time (a visibility query)',
    )
    .option('--status <status>', `only these: ${LIST_STATUSES.join(' | ')}`)
    .option('--name <name>', 'only mosaics of this name')
    .option('--limit <n>', 'at most this many (default 1000)')
    .option('--json', 'print JSON')
    .action((o: ListOptions) => listAction(o, withClient));
}

async function listAction(o: ListOptions, withClient: WithClient): Promise<void> {
  const limit = o.limit === undefined ? undefined : numberOption('--limit', o.limit);
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
