import { createHash } from 'node:crypto';
import type { TileAddress } from '../../sources/request-url';

/** What the store knows of a tile: enough to serve it stale and to refresh it conditionally. */
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
  /** Where the tile is: a local path, or an `s3://` URL for a store in a bucket. */
  path: string;
  meta: TileMeta;
}

/** A tile store, on a local disk or in a bucket: the three things a fetch batch asks of it. */
export interface Tiles {
  readonly root: string;
  /** Writes a tile; where it is and its size. Writing the same tile twice leaves one tile. */
  put(
    source: string,
    t: TileAddress,
    body: Buffer,
    meta: Omit<TileMeta, 'bytes' | 'sha256'>,
  ): Promise<{ path: string; bytes: number }>;
  /** Keeps a whole metatile response as one image, named by its request so a retry rewrites the same one. */
  putChunk(
    source: string,
    z: number,
    unit: { url: string; width: number; height: number },
    body: Buffer,
    contentType: string,
  ): Promise<string>;
  /** The last good copy of a tile, or null. */
  get(source: string, t: TileAddress): Promise<StoredTile | null>;
  /**
   * Records that a request shape of the source was served at `at` (ms): one small file or object per shape,
   * `<source>/.served/<shapeKey>`, so every worker and every later run knows it. `shapeKey` is a sha256 hex.
   */
  markServed(source: string, shapeKey: string, at: number): Promise<void>;
  /** When the shape was last recorded served, or null. */
  servedAt(source: string, shapeKey: string): Promise<number | null>;
}

/** The folder (or key part) of a source's served-shape records: not a zoom level, not `chunks`. */
export const SERVED_DIR = '.served';

/** A served-shape record's name: a sha256 hex and nothing else, so it stays one name inside the source's folder. */
export function checkShapeKey(shapeKey: string): string {
  if (!/^[0-9a-f]{64}$/.test(shapeKey))
    throw new Error(`tile store: shapeKey must be a sha256 hex digest (got ${shapeKey.length} characters)`);
  return shapeKey;
}

/** The record's body: the time it was served. */
export const servedRecord = (at: number) => Buffer.from(JSON.stringify({ servedAt: Math.round(at) }));

/** The time in a record, or null for one that is not a record (torn by hand, not JSON). */
export function parseServedRecord(body: Buffer): number | null {
  try {
    const at = (JSON.parse(body.toString('utf8')) as { servedAt?: unknown }).servedAt;
    return typeof at === 'number' && Number.isFinite(at) ? at : null;
  } catch {
    return null;
  }
}

export const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/jpg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/tiff': 'tif',
};
/** Extension -> content type: the first type listed for it above, and `bin` for the rest. */
export const TYPES: Record<string, string> = {
  ...Object.fromEntries(
    Object.entries(EXTENSIONS)
      .reverse()
      .map(([type, ext]) => [ext, type]),
  ),
  bin: 'application/octet-stream',
};

export const extensionOf = (contentType: string) =>
  EXTENSIONS[contentType.split(';')[0]!.trim().toLowerCase()] ?? 'bin';
export const contentTypeOf = (ext: string): string | undefined => (Object.hasOwn(TYPES, ext) ? TYPES[ext] : undefined);

/** A chunk's file name: its size and a hash of its request, so a retry rewrites the same file. */
export const chunkName = (unit: { url: string; width: number; height: number }, contentType: string) =>
  `${unit.width}x${unit.height}-${createHash('sha256').update(unit.url).digest('hex').slice(0, 24)}.${extensionOf(contentType)}`;
