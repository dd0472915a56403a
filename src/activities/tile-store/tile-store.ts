import { createHash } from 'node:crypto';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import type { TileAddress } from '../../sources/request-url';
import { SOURCE_NAME, SOURCE_NAME_RULE } from '../../sources/schema';
import { makeDirs } from '../confine/confine';
import { atomicWrite } from './atomic-write';
import { StoreBounds, type OpenedDir } from './store-bounds';
import {
  checkShapeKey,
  chunkName,
  extensionOf,
  parseServedRecord,
  SERVED_DIR,
  servedRecord,
  TYPES,
  type StoredTile,
  type TileMeta,
  type Tiles,
} from './tiles';

export type { StoredTile, TileMeta } from './tiles';

// Kept here too for callers that wrote files with the tile store's helper.
export { atomicWrite } from './atomic-write';

/** `<y>.json`: the tile's metadata and the file it describes, as it was when written. */
type Sidecar = TileMeta & { file: string; fileMtimeMs: number };

/** A fetchedAt this far from the time of writing is not "now" (an imported or back-dated copy): a sidecar keeps it. */
const CLOCK_SLACK_MS = 2_000;

/**
 * Tiles on disk as `<root>/<source>/<z>/<x>/<y>.<ext>`. Every write goes to a temporary file first and is
 * renamed into place, so a retried activity or a crash never leaves a torn tile, and writing the same tile
 * twice leaves one tile.
 *
 * What the tile file itself tells (its size, its content hash, its modification time as fetchedAt, its type
 * by extension) is not written twice: a `<y>.json` sidecar is written only for what it cannot tell - ETag,
 * Last-Modified, or a fetchedAt other than the time of writing. A second file per tile would cost as much as
 * the tile's own write (a new inode each), which is most of a seeding run's own work. A sidecar is believed
 * only while the file it names is the one it was written for (same hash, modified in the same second), so an
 * old one beside a newer copy, or one of two writers racing, is ignored rather than removed at every write.
 * (The same bytes written again within that second keep it: its validators still describe exactly those bytes.)
 * A copy of the tile under another extension (its server changed format) is removed when the tile is written,
 * except in a folder this store made and where it has not written the tile yet: nothing can be there.
 */
export class TileStore implements Tiles {
  /** Folders known to exist (a mkdir per tile costs as much as its write); not known to be inside the root. */
  private readonly made = new Set<string>();
  /** Folders this store made: no copy of a tile under another extension can be in them from before. */
  private readonly fresh = new Set<string>();
  /** Tiles this store has written (`<dir>/<y>`). */
  private readonly written = new Set<string>();
  /** Every folder and file used stays inside the root after symlinks, checked at each use. */
  private readonly bounds: StoreBounds;

  constructor(readonly root: string) {
    this.bounds = new StoreBounds(root);
  }

  dir(source: string, t: TileAddress): string {
    return path.join(this.sourceDir(source), String(t.z), String(t.x));
  }

  private sourceDir(source: string): string {
    // A folder of the store: `..` or a path would write beside it.
    if (!SOURCE_NAME.test(source))
      throw new Error(`tile store: source name ${SOURCE_NAME_RULE} (got ${JSON.stringify(source)})`);
    return path.join(this.root, source);
  }

  /** Makes `dir` once per batch (a mkdir per tile costs as much as its write); confinement is each use's own. */
  private async ensureDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    // Checked before anything is made: a linked folder would have it made elsewhere.
    await this.bounds.checkDir(dir, true);
    // The first folder it had to make, or undefined when `dir` was there already.
    if (await makeDirs(dir)) this.fresh.add(dir);
    this.made.add(dir);
  }

  /**
   * `dir`, made if need be, opened and checked for one use: the folder may have been swapped for a symlink
   * since the last tile, so the check is never carried over from one use to the next.
   */
  private async openDir(dir: string): Promise<OpenedDir> {
    await this.ensureDir(dir);
    try {
      return await this.bounds.openDir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      // Removed since it was made: made again.
      this.made.delete(dir);
      await this.ensureDir(dir);
      return this.bounds.openDir(dir);
    }
  }

  /** Copies of the tile under other extensions (its server changed format), so no older one can pass for it. */
  private async removeOtherCopies(dir: string, opened: OpenedDir, y: number, keep: string): Promise<void> {
    const key = path.join(dir, String(y));
    const unseen = this.fresh.has(dir) && !this.written.has(key);
    this.written.add(key);
    if (unseen) return;
    await Promise.all(
      Object.keys(TYPES)
        .filter((e) => e !== keep)
        .map((e) => rm(opened.at(`${y}.${e}`), { force: true })),
    );
  }

  /** Writes a tile (and its sidecar when needed); its path and size. */
  async put(
    source: string,
    t: TileAddress,
    body: Buffer,
    meta: Omit<TileMeta, 'bytes' | 'sha256'>,
  ): Promise<{ path: string; bytes: number }> {
    const dir = this.dir(source, t);
    const opened = await this.openDir(dir);
    try {
      // Judged before the write: a slow disk must not make "now" look back-dated.
      const needsSidecar =
        meta.etag !== undefined ||
        meta.lastModified !== undefined ||
        Math.abs(Date.now() - meta.fetchedAt) > CLOCK_SLACK_MS;
      const ext = extensionOf(meta.contentType);
      const name = `${t.y}.${ext}`;
      await this.removeOtherCopies(dir, opened, t.y, ext);
      await atomicWrite(opened.at(name), body);
      if (needsSidecar) {
        // Names the very file it describes (its modification time), so a later copy written without a sidecar
        // is never taken for this one; the metadata goes last: a reader that finds it finds its tile.
        const { mtimeMs } = await stat(opened.at(name));
        const sidecar: Sidecar = {
          ...meta,
          bytes: body.length,
          sha256: createHash('sha256').update(body).digest('hex'),
          file: name,
          fileMtimeMs: mtimeMs,
        };
        await atomicWrite(opened.at(`${t.y}.json`), Buffer.from(JSON.stringify(sidecar)));
      }
      return { path: path.join(dir, name), bytes: body.length };
    } finally {
      await opened.close();
    }
  }

  /**
   * A whole metatile response kept as one image (a mosaic that needs no tile cache), named by its request so a
   * retry rewrites the same file: `<root>/<source>/chunks/<z>/<width>x<height>-<hash of the request>.<ext>`.
   */
  async putChunk(
    source: string,
    z: number,
    unit: { url: string; width: number; height: number },
    body: Buffer,
    contentType: string,
  ): Promise<string> {
    const dir = path.join(this.sourceDir(source), 'chunks', String(z));
    const name = chunkName(unit, contentType);
    const opened = await this.openDir(dir);
    try {
      await atomicWrite(opened.at(name), body);
    } finally {
      await opened.close();
    }
    return path.join(dir, name);
  }

  /** `<root>/<source>/.served/<shapeKey>`, written atomically: a reader sees the old time or the new one. */
  async markServed(source: string, shapeKey: string, at: number): Promise<void> {
    const dir = path.join(this.sourceDir(source), SERVED_DIR);
    const name = checkShapeKey(shapeKey);
    const opened = await this.openDir(dir);
    try {
      await atomicWrite(opened.at(name), servedRecord(at));
    } finally {
      await opened.close();
    }
  }

  async servedAt(source: string, shapeKey: string): Promise<number | null> {
    const dir = path.join(this.sourceDir(source), SERVED_DIR);
    const file = path.join(dir, checkShapeKey(shapeKey));
    await this.bounds.checkDir(dir);
    try {
      return parseServedRecord(await this.bounds.readFile(file));
    } catch (err) {
      if (absent(err)) return null;
      throw err;
    }
  }

  /**
   * The last good copy of a tile, or null. A sidecar counts only if it describes the file beside it (two
   * writers of one tile can interleave); otherwise the newest file of the tile, whatever its extension (a
   * server may have sent another format than the source says), described by itself.
   */
  async get(source: string, t: TileAddress): Promise<StoredTile | null> {
    const dir = this.dir(source, t);
    await this.bounds.checkDir(dir);
    let sidecar: Sidecar | null = null;
    try {
      sidecar = JSON.parse((await this.bounds.readFile(path.join(dir, `${t.y}.json`))).toString('utf8')) as Sidecar;
    } catch (err) {
      // None, or unreadable (torn by hand, not JSON): the files say what they are. Other errors are the store's.
      if (!absent(err) && !(err instanceof SyntaxError)) throw err;
    }
    const found = await Promise.all(
      Object.keys(TYPES).map(async (ext) => {
        const file = path.join(dir, `${t.y}.${ext}`);
        // A symlinked tile is refused, not followed.
        const st = await this.bounds.lstatFile(file);
        return st?.isFile() ? { ext, file, mtimeMs: st.mtimeMs } : null;
      }),
    );
    const newest = found.filter((f) => f !== null).sort((a, b) => b.mtimeMs - a.mtimeMs)[0];
    if (!newest) return null;
    const body = await this.bounds.readFile(newest.file);
    const sha256 = createHash('sha256').update(body).digest('hex');
    // The same whole second, not the same nanosecond: a copy restored by tar or cp keeps its sidecar; the hash
    // still has to match.
    const sameSecond =
      typeof sidecar?.fileMtimeMs === 'number' &&
      Math.floor(sidecar.fileMtimeMs / 1000) === Math.floor(newest.mtimeMs / 1000);
    if (sidecar && sidecar.file === path.basename(newest.file) && sameSecond && sidecar.sha256 === sha256) {
      const { file: _file, fileMtimeMs: _mtime, ...meta } = sidecar;
      return { path: newest.file, meta };
    }
    // The size from the image's header (no decode); an unreadable header leaves it out.
    const { width, height } = await sharp(body)
      .metadata()
      .catch(() => ({ width: undefined, height: undefined }));
    const meta: TileMeta = {
      fetchedAt: Math.round(newest.mtimeMs),
      contentType: TYPES[newest.ext]!,
      bytes: body.length,
      sha256,
    };
    return { path: newest.file, meta: width !== undefined && height !== undefined ? { ...meta, width, height } : meta };
  }
}

/** A missing file, or a path through something that is not a folder. */
function absent(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
