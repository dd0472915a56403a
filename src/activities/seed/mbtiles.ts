/**
 * An MBTiles 1.3 file: a SQLite database with a `metadata` table (name, format, bounds, center, minzoom,
 * maxzoom, ...) and a `tiles` table keyed by zoom, column and row, rows counted from the south (TMS), as
 * GDAL, QGIS and tile servers read it. Written under a temporary name beside the target and renamed into
 * place, so a reader never sees half a file and a retry starts clean. A new file keeps every tile of the
 * earlier one that it does not replace: a seed that meets a bad night never publishes less than it had.
 */
import { randomUUID } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';

export type MbtilesFormat = 'png' | 'jpg' | 'webp';

export interface MbtilesMeta {
  name: string;
  format: MbtilesFormat;
  /** west, south, east, north in degrees (EPSG:4326). */
  bounds: [number, number, number, number];
  minzoom: number;
  maxzoom: number;
  description?: string;
}

export interface MbtilesTile {
  z: number;
  x: number;
  /** XYZ row (from the north); stored as the TMS row. */
  y: number;
  data: Buffer;
}

/** The file's application id (`MPBX`), as the specification asks. */
const APPLICATION_ID = 0x4d504258;
/** Tiles inserted per transaction. */
const CHUNK = 512;

/** What a write put in the file. */
export interface MbtilesWritten {
  /** Tiles written from the new run. */
  written: number;
  /** Tiles kept from the earlier file (those the new run did not write). */
  kept: number;
  /** Why the earlier file's tiles were not kept, when there was one and they were not. */
  earlierNotKept?: string;
  /** The format the file names (the earlier file's, when the new run wrote no tile). */
  format: MbtilesFormat;
}

/** The earlier file's metadata and tiles, opened read-only; null when there is none. */
function openEarlier(
  earlier: string | undefined,
): { db: Database.Database; meta: Map<string, string> } | { error: string } | null {
  if (earlier === undefined) return null;
  let db: Database.Database;
  try {
    db = new Database(earlier, { readonly: true, fileMustExist: true });
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_CANTOPEN') return null;
    return { error: 'the earlier file is not an SQLite database' };
  }
  try {
    const rows = db.prepare('SELECT name, value FROM metadata').all() as { name: unknown; value: unknown }[];
    db.prepare('SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles LIMIT 0').all();
    return { db, meta: new Map(rows.map((r) => [String(r.name), String(r.value)])) };
  } catch {
    db.close();
    return { error: 'the earlier file is not an MBTiles file (no metadata or tiles table)' };
  }
}

type Bounds = [number, number, number, number];

/** A metadata `bounds` value (west, south, east, north), or null when it is not four numbers. */
function parseBounds(b: string | undefined): Bounds | null {
  const n = (b ?? '').split(',').map(Number);
  return n.length === 4 && n.every(Number.isFinite) ? (n as Bounds) : null;
}

/** Two bounds' union; `a` alone when `b` is null. */
function unionBounds(a: Bounds, b: Bounds | null): Bounds {
  return b ? [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])] : a;
}

/** What `writeMbtiles` writes, and where. */
export interface MbtilesWrite {
  /** The file to write (replaced whole when it exists). */
  file: string;
  meta: MbtilesMeta;
  /** The new run's tiles, read in chunks. */
  tiles: AsyncIterable<MbtilesTile>;
  /** Called with the tiles written so far after each chunk (an activity's heartbeat). */
  onChunk?: (written: number) => void;
  /** The file being replaced, or a local copy of it: its tiles the new ones do not replace are kept. */
  earlier?: string | undefined;
}

/**
 * Writes `tiles` (read in chunks, so the file need not fit in memory) into a new MBTiles file at `file`;
 * `onChunk` after each chunk (an activity's heartbeat). With `earlier` (the file being replaced, or a local
 * copy of it), every tile of it the new tiles do not replace is copied into the new file, and the metadata's
 * zoom range and bounds cover both, unless its format differs from the new tiles' (a file names one format).
 */
export async function writeMbtiles({
  file,
  meta,
  tiles,
  onChunk = () => undefined,
  earlier,
}: MbtilesWrite): Promise<MbtilesWritten> {
  // A name of its own, made here and nowhere else: an attempt still running, or a link planted at the name, is never written through.
  const tmp = join(dirname(file), `.${basename(file)}.${randomUUID()}.tmp`);
  await (await open(tmp, 'wx', 0o644)).close();
  let db: Database.Database;
  try {
    db = new Database(tmp);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  let old: ReturnType<typeof openEarlier> = null;
  try {
    createTables(db);
    const count = await insertTiles(db, tiles, onChunk);
    // The earlier file's tiles that this run did not write, in its own format (a run that wrote none takes it).
    old = openEarlier(earlier);
    const merged = keepEarlier({ db, old, count, meta, onChunk });
    writeMetadata(db, meta, merged);
    db.close();
    await rename(tmp, file);
    const { kept, format, earlierNotKept } = merged;
    return { written: count, kept, format, ...(earlierNotKept !== undefined ? { earlierNotKept } : {}) };
  } catch (err) {
    if (db.open) db.close();
    await rm(tmp, { force: true });
    throw err;
  } finally {
    if (old && 'db' in old && old.db.open) old.db.close();
  }
}

/** The new file's settings and its empty `metadata` and `tiles` tables. */
function createTables(db: Database.Database): void {
  // A new file written once then renamed: no journal to keep it consistent mid-way.
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.exec(
    'CREATE TABLE metadata (name TEXT, value TEXT); CREATE UNIQUE INDEX metadata_name ON metadata (name);' +
      'CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);' +
      'CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);',
  );
}

/** Inserts the new run's tiles, a transaction per chunk; returns how many. */
async function insertTiles(
  db: Database.Database,
  tiles: AsyncIterable<MbtilesTile>,
  onChunk: (written: number) => void,
): Promise<number> {
  // A tile met twice (a level re-drawn) keeps its last copy.
  const put = db.prepare(
    'INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)',
  );
  const flush = db.transaction((batch: MbtilesTile[]) => {
    for (const t of batch) put.run(t.z, t.x, 2 ** t.z - 1 - t.y, t.data);
  });
  let count = 0;
  let batch: MbtilesTile[] = [];
  for await (const t of tiles) {
    batch.push(t);
    if (batch.length >= CHUNK) {
      flush(batch);
      count += batch.length;
      batch = [];
      onChunk(count);
    }
  }
  flush(batch);
  count += batch.length;
  return count;
}

/** The file's metadata as merged with the earlier file's, and what was kept of it. */
interface Merged {
  minzoom: number;
  maxzoom: number;
  bounds: Bounds;
  format: MbtilesFormat;
  kept: number;
  earlierNotKept: string | undefined;
}

/** The new file, its new tiles written, and the earlier file it replaces. */
interface EarlierMerge {
  db: Database.Database;
  old: ReturnType<typeof openEarlier>;
  /** Tiles the new run wrote. */
  count: number;
  meta: MbtilesMeta;
  onChunk: (written: number) => void;
}

/**
 * The earlier file's tiles that the new run did not write, copied in when its format is the new tiles' (or
 * the new run wrote none); the zoom range and bounds then cover both.
 */
function keepEarlier({ db, old, count, meta, onChunk }: EarlierMerge): Merged {
  let { minzoom, maxzoom, bounds, format } = meta;
  let kept = 0;
  let earlierNotKept: string | undefined;
  if (old && 'error' in old) earlierNotKept = old.error;
  else if (old) {
    const oldFormat = old.meta.get('format') ?? 'png';
    if (count === 0 && (['png', 'jpg', 'webp'] as string[]).includes(oldFormat)) format = oldFormat as MbtilesFormat;
    if (oldFormat !== format) earlierNotKept = `its tiles are ${oldFormat}, this run's are ${format}`;
    else {
      kept = copyEarlierTiles(db, old.db, count, onChunk);
      if (kept > 0) {
        const oldMeta = old.meta;
        const z = (k: string) => Number(oldMeta.get(k) ?? NaN);
        const oldBounds = parseBounds(old.meta.get('bounds'));
        if (count === 0) {
          // Only the earlier tiles: the file says what it said before, or what its tiles say.
          const range = db.prepare('SELECT MIN(zoom_level) lo, MAX(zoom_level) hi FROM tiles').get() as {
            lo: number;
            hi: number;
          };
          minzoom = Number.isInteger(z('minzoom')) ? z('minzoom') : range.lo;
          maxzoom = Number.isInteger(z('maxzoom')) ? z('maxzoom') : range.hi;
          bounds = oldBounds ?? meta.bounds;
        } else {
          if (Number.isInteger(z('minzoom'))) minzoom = Math.min(minzoom, z('minzoom'));
          if (Number.isInteger(z('maxzoom'))) maxzoom = Math.max(maxzoom, z('maxzoom'));
          bounds = unionBounds(bounds, oldBounds);
        }
      }
    }
  }
  return { minzoom, maxzoom, bounds, format, kept, earlierNotKept };
}

/** Copies every tile of `from` that `db` does not hold, a transaction per chunk; returns how many. */
function copyEarlierTiles(
  db: Database.Database,
  from: Database.Database,
  count: number,
  onChunk: (written: number) => void,
): number {
  let kept = 0;
  const keep = db.prepare(
    'INSERT OR IGNORE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)',
  );
  const copy = db.transaction((rows: [number, number, number, Buffer][]) => {
    for (const r of rows) kept += keep.run(...r).changes;
  });
  let rows: [number, number, number, Buffer][] = [];
  for (const r of from
    .prepare('SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles')
    .raw()
    .iterate() as Iterable<[number, number, number, Buffer]>) {
    rows.push(r);
    if (rows.length >= CHUNK) {
      copy(rows);
      rows = [];
      onChunk(count + kept);
    }
  }
  copy(rows);
  return kept;
}

/** The `metadata` table's rows, in one transaction. */
function writeMetadata(db: Database.Database, meta: MbtilesMeta, merged: Merged): void {
  const { format, minzoom, maxzoom } = merged;
  const putMeta = db.prepare('INSERT INTO metadata (name, value) VALUES (?, ?)');
  const [w, s, e, n] = merged.bounds;
  const entries: [string, string][] = [
    ['name', meta.name],
    ['format', format],
    ['bounds', [w, s, e, n].join(',')],
    ['center', [(w + e) / 2, (s + n) / 2, minzoom].join(',')],
    ['minzoom', String(minzoom)],
    ['maxzoom', String(maxzoom)],
    ['type', 'baselayer'],
    ['version', '1'],
    ...(meta.description !== undefined ? [['description', meta.description] as [string, string]] : []),
  ];
  db.transaction(() => entries.forEach(([k, v]) => putMeta.run(k, v)))();
}
