import type { ManifestTile } from '../../messages/mosaic-types';
import { joinLocation } from '../storage/location';
import { storageFor } from '../storage/storage';

/**
 * Per-tile records live beside the output (on disk or in its bucket), one journal file per batch and pass, not in workflow histories: a history
 * keeps counts and indices only, so a 100,000-tile job does not carry 100,000 records through Temporal.
 * A retried batch rewrites its own journal; a later pass's record of a tile replaces an earlier one.
 */
export interface Journal {
  batchId: string;
  pass: number;
  writtenAt: number;
  tiles: ManifestTile[];
}

export async function writeJournal(dir: string, journal: Journal): Promise<void> {
  if (!/^[\w.-]+$/.test(journal.batchId))
    throw new Error(`journal: batch id must be a simple name (got ${JSON.stringify(journal.batchId)})`);
  await storageFor(dir).write(joinLocation(dir, `${journal.batchId}.json`), Buffer.from(JSON.stringify(journal)), {
    contentType: 'application/json',
  });
}

/** Every journal of a mosaic, oldest pass first (within a pass, in write order). */
export async function readJournals(dir: string): Promise<Journal[]> {
  const storage = storageFor(dir);
  // Files only: a symlinked journal could point anywhere, and is not one a batch wrote.
  const names = (await storage.listFiles(dir)).filter((n) => n.endsWith('.json'));
  const journals = await Promise.all(
    names.map(async (n) => {
      const file = joinLocation(dir, n);
      let text: string;
      try {
        const body = await storage.read(file);
        // Listed, then gone: removed by the next run's planning while this one read.
        if (body === null) return null;
        text = body.toString('utf8');
      } catch (err) {
        throw new Error(`journal ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
          cause: err,
        });
      }
      try {
        return JSON.parse(text) as Journal;
      } catch {
        // Neither V8's message nor its error as the cause: it quotes the file's text.
        throw new Error(`journal ${file} cannot be read (not valid JSON)`);
      }
    }),
  );
  return journals.filter((j): j is Journal => j !== null).sort((a, b) => a.pass - b.pass || a.writtenAt - b.writtenAt);
}

/**
 * The latest record of every tile 0..total-1 (null where no batch has recorded it yet), with `attempts`
 * counting the requests of every pass (and re-drive) that recorded it, not only the last one's. A pass that
 * made no request for the tile (the breaker refused it) keeps what the last request of an earlier pass got:
 * its kind, HTTP status and abandonment.
 */
export function latestRecords(journals: Journal[], total: number): (ManifestTile | null)[] {
  const out: (ManifestTile | null)[] = new Array<ManifestTile | null>(total).fill(null);
  for (const j of journals) {
    for (const t of j.tiles) {
      if (!(t.i >= 0 && t.i < total)) continue;
      const before = out[t.i];
      // A served tile is never un-served by a later pass: a re-drive that asks the source for a tile a mirror
      // served, and finds it still refusing (and every mirror too), keeps the mirror's tile.
      if (before?.status === 'ok' && t.status !== 'ok') {
        out[t.i] = { ...before, attempts: (Number(before.attempts) || 0) + (Number(t.attempts) || 0) };
        continue;
      }
      out[t.i] = before
        ? {
            ...(t.kind === undefined ? lastRequest(before) : {}),
            ...t,
            attempts: (Number(before.attempts) || 0) + (Number(t.attempts) || 0),
          }
        : t;
    }
  }
  return out;
}

/** What a record says of its tile's last request. */
function lastRequest(t: ManifestTile): Pick<ManifestTile, 'kind' | 'httpStatus' | 'abandonedAfterMs'> {
  return {
    ...(t.kind !== undefined ? { kind: t.kind } : {}),
    ...(t.kind !== undefined && t.httpStatus !== undefined ? { httpStatus: t.httpStatus } : {}),
    ...(t.kind !== undefined && t.abandonedAfterMs !== undefined ? { abandonedAfterMs: t.abandonedAfterMs } : {}),
  };
}
