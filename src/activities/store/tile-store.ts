import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { TileAddress } from '../../sources/request-url';

/** What the store keeps beside each tile: enough to serve it stale and to refresh it conditionally. */
export interface TileMeta {
  fetchedAt: number;
  contentType: string;
  bytes: number;
  sha256: string;
  etag?: string;
  lastModified?: string;
  width?: number;
  height?: number;
}

export interface StoredTile {
  path: string;
  meta: TileMeta;
}

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/jpg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/tiff': 'tif',
};

/**
 * Tiles on disk as `<root>/<source>/<z>/<x>/<y>.<ext>` with `<y>.json` metadata beside them. Every write goes
 * to a temporary file first and is renamed into place, so a retried activity or a crash never leaves a torn
 * tile, and writing the same tile twice leaves one tile.
 */
export class TileStore {
  /** Folders known to exist: a mkdir per tile costs as much as its write. */
  private readonly made = new Set<string>();

  constructor(readonly root: string) {}

  dir(source: string, t: TileAddress): string {
    return path.join(this.sourceDir(source), String(t.z), String(t.x));
  }

  private sourceDir(source: string): string {
    if (!/^[\w.-]+$/.test(source)) throw new Error(`tile store: source name must be a simple name (got ${JSON.stringify(source)})`);
    return path.join(this.root, source);
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    await mkdir(dir, { recursive: true });
    this.made.add(dir);
  }

  async put(source: string, t: TileAddress, body: Buffer, meta: Omit<TileMeta, 'bytes' | 'sha256'>): Promise<StoredTile> {
    const dir = this.dir(source, t);
    await this.ensureDir(dir);
    const ext = EXTENSIONS[meta.contentType.split(';')[0]!.trim().toLowerCase()] ?? 'bin';
    const full: TileMeta = { ...meta, bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') };
    const tilePath = path.join(dir, `${t.y}.${ext}`);
    await atomicWrite(tilePath, body);
    // The metadata goes last: a reader that finds it finds the tile it describes.
    await atomicWrite(path.join(dir, `${t.y}.json`), Buffer.from(JSON.stringify({ ...full, file: path.basename(tilePath) })));
    return { path: tilePath, meta: full };
  }

  /**
   * A whole metatile response kept as one image (a mosaic that needs no tile cache), named by its request so a
   * retry rewrites the same file: `<root>/<source>/chunks/<z>/<width>x<height>-<hash of the request>.<ext>`.
   */
  async putChunk(source: string, z: number, unit: { url: string; width: number; height: number }, body: Buffer, contentType: string): Promise<string> {
    const dir = path.join(this.sourceDir(source), 'chunks', String(z));
    await this.ensureDir(dir);
    const ext = EXTENSIONS[contentType.split(';')[0]!.trim().toLowerCase()] ?? 'bin';
    const file = path.join(dir, `${unit.width}x${unit.height}-${createHash('sha256').update(unit.url).digest('hex').slice(0, 24)}.${ext}`);
    await atomicWrite(file, body);
    return file;
  }

  /** The last good copy of a tile, or null. */
  async get(source: string, t: TileAddress): Promise<StoredTile | null> {
    const dir = this.dir(source, t);
    let meta: TileMeta & { file: string };
    try {
      meta = JSON.parse(await readFile(path.join(dir, `${t.y}.json`), 'utf8')) as TileMeta & { file: string };
    } catch {
      return null;
    }
    const { file, ...rest } = meta;
    return { path: path.join(dir, file), meta: rest };
  }
}

/** Writes to a temporary file and renames it into place: readers see the old file or the new one, never a torn one. */
export async function atomicWrite(target: string, data: Buffer): Promise<void> {
  const tmp = `${target}.${process.pid}.${randomUUID()}.tmp`;
  try {
    await writeFile(tmp, data);
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
