import { createHash } from 'node:crypto';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import type { TileAddress } from '../../sources/request-url';
import { SOURCE_NAME, SOURCE_NAME_RULE } from '../../sources/schema';
import { joinLocation, objectUrl, parseObjectUrl } from '../storage/location';
import { storageError } from '../storage/storage';
import {
  checkShapeKey,
  chunkName,
  contentTypeOf,
  extensionOf,
  parseServedRecord,
  SERVED_DIR,
  servedRecord,
  type StoredTile,
  type TileMeta,
  type Tiles,
} from './tiles';

/** User metadata names (S3 lowercases them): what a tile file on disk tells by itself, an object carries here. */
const META = {
  fetchedAt: 'fetched-at',
  sha256: 'sha256',
  etag: 'origin-etag',
  lastModified: 'origin-last-modified',
  width: 'width',
  height: 'height',
} as const;

/**
 * Tiles as objects, `<prefix>/<source>/<z>/<x>/<y>.<ext>`, for a fleet whose workers share no disk. A PUT is
 * atomic (a reader sees the old object or the new one), so no temporary name is needed; what a local store
 * keeps in a sidecar (validators, a back-dated fetchedAt) and the content hash ride in the object's metadata.
 * A tile whose server changed format leaves its older copy under the other extension; `get` takes the newest.
 */
export class ObjectTileStore implements Tiles {
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(
    readonly root: string,
    private readonly client: S3Client,
  ) {
    const { bucket, key } = parseObjectUrl(root);
    this.bucket = bucket;
    this.prefix = key;
  }

  private key(...parts: string[]): string {
    return [this.prefix, ...parts].filter((s) => s !== '').join('/');
  }

  private sourcePart(source: string): string {
    if (!SOURCE_NAME.test(source))
      throw new Error(`tile store: source name ${SOURCE_NAME_RULE} (got ${JSON.stringify(source)})`);
    return source;
  }

  private tileStem(source: string, t: TileAddress): string {
    return this.key(this.sourcePart(source), String(t.z), String(t.x), String(t.y));
  }

  async put(
    source: string,
    t: TileAddress,
    body: Buffer,
    meta: Omit<TileMeta, 'bytes' | 'sha256'>,
  ): Promise<{ path: string; bytes: number }> {
    const key = `${this.tileStem(source, t)}.${extensionOf(meta.contentType)}`;
    const metadata: Record<string, string> = {
      [META.fetchedAt]: String(Math.round(meta.fetchedAt)),
      [META.sha256]: createHash('sha256').update(body).digest('hex'),
    };
    // Metadata travels as HTTP headers: only printable ASCII survives, and validators are that by definition.
    if (meta.etag !== undefined && /^[\x20-\x7e]*$/.test(meta.etag)) metadata[META.etag] = meta.etag;
    if (meta.lastModified !== undefined && /^[\x20-\x7e]*$/.test(meta.lastModified))
      metadata[META.lastModified] = meta.lastModified;
    if (meta.width !== undefined) metadata[META.width] = String(meta.width);
    if (meta.height !== undefined) metadata[META.height] = String(meta.height);
    await this.guard('write', key, () =>
      this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: contentTypeOf(extensionOf(meta.contentType)),
          Metadata: metadata,
        }),
      ),
    );
    return { path: objectUrl({ bucket: this.bucket, key }), bytes: body.length };
  }

  async putChunk(
    source: string,
    z: number,
    unit: { url: string; width: number; height: number },
    body: Buffer,
    contentType: string,
  ): Promise<string> {
    const key = this.key(this.sourcePart(source), 'chunks', String(z), chunkName(unit, contentType));
    await this.guard('write', key, () =>
      this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: contentTypeOf(extensionOf(contentType)),
        }),
      ),
    );
    return objectUrl({ bucket: this.bucket, key });
  }

  /** The newest copy of the tile (one LIST of its names, one GET), or null. */
  async get(source: string, t: TileAddress): Promise<StoredTile | null> {
    const stem = this.tileStem(source, t);
    const listed =
      (
        await this.guard('list', `${stem}.`, () =>
          this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${stem}.`, MaxKeys: 32 })),
        )
      ).Contents ?? [];
    const copies = listed
      .filter(
        (o) =>
          o.Key !== undefined &&
          contentTypeOf(o.Key.slice(stem.length + 1)) !== undefined &&
          !o.Key.slice(stem.length + 1).includes('/'),
      )
      .sort((a, b) => (b.LastModified?.getTime() ?? 0) - (a.LastModified?.getTime() ?? 0));
    for (const copy of copies) {
      const key = copy.Key!;
      let out;
      try {
        out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      } catch (err) {
        // Removed between the listing and the read: the next copy, if any.
        if ((err as { name?: string }).name === 'NoSuchKey') continue;
        throw storageError('read', objectUrl({ bucket: this.bucket, key }), err);
      }
      const body = Buffer.from((await out.Body?.transformToByteArray()) ?? new Uint8Array());
      const m = out.Metadata ?? {};
      const sha256 = createHash('sha256').update(body).digest('hex');
      const num = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined);
      // Metadata another writer left is believed only for the bytes it was written with.
      const own = m[META.sha256] === sha256;
      const meta: TileMeta = {
        fetchedAt:
          (own ? num(m[META.fetchedAt]) : undefined) ??
          out.LastModified?.getTime() ??
          copy.LastModified?.getTime() ??
          0,
        contentType: contentTypeOf(key.slice(stem.length + 1))!,
        bytes: body.length,
        sha256,
      };
      const etag = m[META.etag];
      const lastModified = m[META.lastModified];
      if (own && etag !== undefined) meta.etag = etag;
      if (own && lastModified !== undefined) meta.lastModified = lastModified;
      let width = own ? num(m[META.width]) : undefined;
      let height = own ? num(m[META.height]) : undefined;
      if (width === undefined || height === undefined) {
        ({ width, height } = await sharp(body)
          .metadata()
          .catch(() => ({ width: undefined, height: undefined })));
      }
      if (width !== undefined && height !== undefined) Object.assign(meta, { width, height });
      return { path: objectUrl({ bucket: this.bucket, key }), meta };
    }
    return null;
  }

  /** `<prefix>/<source>/.served/<shapeKey>`: one small object, rewritten whole by each mark. */
  async markServed(source: string, shapeKey: string, at: number): Promise<void> {
    const key = this.key(this.sourcePart(source), SERVED_DIR, checkShapeKey(shapeKey));
    await this.guard('write', key, () =>
      this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: servedRecord(at),
          ContentType: 'application/json',
        }),
      ),
    );
  }

  async servedAt(source: string, shapeKey: string): Promise<number | null> {
    const key = this.key(this.sourcePart(source), SERVED_DIR, checkShapeKey(shapeKey));
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return parseServedRecord(Buffer.from((await out.Body?.transformToByteArray()) ?? new Uint8Array()));
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return null;
      throw storageError('read', objectUrl({ bucket: this.bucket, key }), err);
    }
  }

  /** Runs an S3 call; its error names the object, not the request. */
  private async guard<T>(what: string, key: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw storageError(what, joinLocation(objectUrl({ bucket: this.bucket, key: '' }), key), err);
    }
  }
}
