/**
 * An MBTiles 1.3 file: a SQLite database with a `metadata` table (name, format, bounds, center, minzoom,
 * maxzoom, ...) and a `tiles` table keyed by zoom, column and row, rows counted from the south (TMS), as
 * GDAL, QGIS and tile servers read it. Written under a temporary name beside the target and renamed into
 * place, so a reader never sees half a file and a retry starts clean.
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

/**
 * Writes `tiles` (read in chunks, so the file need not fit in memory) into a new MBTiles file at `file`;
 * `onChunk` after each chunk (an activity's heartbeat).
 */
export async function writeMbtiles(file: string, meta: MbtilesMeta, tiles: AsyncIterable<MbtilesTile>, onChunk: (written: number) => void = () => undefined): Promise<number> {
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
  let count = 0;
  try {
    // A new file written once then renamed: no journal to keep it consistent mid-way.
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma(`application_id = ${APPLICATION_ID}`);
    db.exec(
      'CREATE TABLE metadata (name TEXT, value TEXT); CREATE UNIQUE INDEX metadata_name ON metadata (name);' +
        'CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);' +
        'CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);',
    );
    const putMeta = db.prepare('INSERT INTO metadata (name, value) VALUES (?, ?)');
    const [w, s, e, n] = meta.bounds;
    const entries: [string, string][] = [
      ['name', meta.name],
      ['format', meta.format],
      ['bounds', [w, s, e, n].join(',')],
      ['center', [(w + e) / 2, (s + n) / 2, meta.minzoom].join(',')],
      ['minzoom', String(meta.minzoom)],
      ['maxzoom', String(meta.maxzoom)],
      ['type', 'baselayer'],
      ['version', '1'],
      ...(meta.description !== undefined ? [['description', meta.description] as [string, string]] : []),
    ];
    db.transaction(() => entries.forEach(([k, v]) => putMeta.run(k, v)))();
    // A tile met twice (a level re-drawn) keeps its last copy.
    const put = db.prepare('INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)');
    const flush = db.transaction((batch: MbtilesTile[]) => {
      for (const t of batch) put.run(t.z, t.x, 2 ** t.z - 1 - t.y, t.data);
    });
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
    db.close();
    await rename(tmp, file);
    return count;
  } catch (err) {
    if (db.open) db.close();
    await rm(tmp, { force: true });
    throw err;
  }
}
