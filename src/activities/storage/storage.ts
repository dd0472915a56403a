import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { randomUUID } from 'node:crypto';
import { copyFile, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { makeDirs } from '../confine/confine';
import { atomicWrite } from '../tile-store/atomic-write';
import { isObjectUrl, parseObjectUrl } from './location';
import { s3Client } from './s3-client';

export interface WriteOptions {
  contentType?: string;
  /** Object metadata (S3 user metadata); a local file keeps none. */
  metadata?: Record<string, string>;
  /** An upload to a bucket: told the bytes sent so far as each part goes (a caller heartbeats on it). */
  onProgress?: (bytes: number) => void;
  /** An upload to a bucket: aborted (its parts removed) when this aborts. */
  signal?: AbortSignal;
}

/**
 * The few things the mosaic's files need, for a local path or an object URL alike. Every write is atomic
 * from a reader's point of view: a local file is renamed into place, an object appears whole when its PUT
 * (or its multipart upload) completes.
 */
export interface Storage {
  /** The file's bytes, or null when there is none. */
  read(loc: string): Promise<Buffer | null>;
  write(loc: string, body: Buffer, opts?: WriteOptions): Promise<void>;
  /** The names directly under `dir` (files and folders alike), none when it does not exist. */
  list(dir: string): Promise<string[]>;
  /** The regular files directly under `dir` (locally, no symlink: it could lead anywhere). */
  listFiles(dir: string): Promise<string[]>;
  /** Removes `dir` and everything under it. */
  removeTree(dir: string): Promise<void>;
  /** Removes these files of one folder (or prefix), those already gone included. */
  remove(locs: readonly string[]): Promise<void>;
  /**
   * The file's size and a token that changes when it is rewritten (a local file's size and mtime, an object's
   * ETag and Last-Modified), without reading it; null when there is none.
   */
  stat(loc: string): Promise<{ size: number; version: string } | null>;
  /** Puts a local file at `loc` (for objects: a multipart upload with a SHA-256 checksum of each part). */
  upload(file: string, loc: string, opts?: WriteOptions): Promise<void>;
  /** Copies the object at `loc` into the local `file`, streamed (false when there is none). */
  download(loc: string, file: string): Promise<boolean>;
}

export function storageFor(loc: string): Storage {
  return isObjectUrl(loc) ? objectStorage(s3Client()) : localStorage;
}

const absent = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

export const localStorage: Storage = {
  async read(loc) {
    try {
      return await readFile(loc);
    } catch (err) {
      if (absent(err)) return null;
      throw err;
    }
  },
  async write(loc, body) {
    await makeDirs(path.dirname(loc));
    await atomicWrite(loc, body);
  },
  async list(dir) {
    try {
      return await readdir(dir);
    } catch (err) {
      if (absent(err)) return [];
      throw err;
    }
  },
  async listFiles(dir) {
    try {
      return (await readdir(dir, { withFileTypes: true })).filter((d) => d.isFile()).map((d) => d.name);
    } catch (err) {
      if (absent(err)) return [];
      throw err;
    }
  },
  async removeTree(dir) {
    await rm(dir, { recursive: true, force: true });
  },
  async stat(loc) {
    try {
      const st = await stat(loc);
      return { size: st.size, version: `${st.size}:${st.mtimeMs}` };
    } catch (err) {
      if (absent(err)) return null;
      throw err;
    }
  },
  async remove(locs) {
    await Promise.all(locs.map((loc) => rm(loc, { force: true })));
  },
  async upload(file, loc) {
    await makeDirs(path.dirname(loc));
    // Copied, not read into memory (an output can be gigabytes), then renamed into place.
    const tmp = `${loc}.${process.pid}.${randomUUID()}.tmp`;
    try {
      await copyFile(file, tmp);
      await rename(tmp, loc);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  },
  async download(loc, file) {
    try {
      await copyFile(loc, file);
      return true;
    } catch (err) {
      if (absent(err)) return false;
      throw err;
    }
  },
};

/** Parts of a multipart upload: S3's minimum is 5 MiB; 16 MiB keeps a 4 GiB output under 300 parts. */
const PART_BYTES = 16 * 1024 * 1024;

/** NoSuchKey means "not there"; a missing bucket is a configuration error and is thrown. */
const s3Missing = (err: unknown) => ['NoSuchKey', 'NotFound'].includes((err as { name?: string }).name ?? '');

/** Storage in an S3 bucket (or one that speaks its API), through `client`. */
export function objectStorage(client: S3Client): Storage {
  return {
    read: (loc) => readObject(client, loc),
    write: (loc, body, opts = {}) => writeObject(client, loc, body, opts),
    list: (dir) => listObjects(client, dir, true),
    listFiles: (dir) => listObjects(client, dir, false),
    removeTree: (dir) => removePrefix(client, dir),
    remove: (locs) => removeObjects(client, locs),
    stat: (loc) => statObject(client, loc),
    upload: (file, loc, opts = {}) => uploadObject(client, file, loc, opts),
    download: (loc, file) => downloadObject(client, loc, file),
  };
}

/** The object's bytes, or null when there is none. */
async function readObject(client: S3Client, loc: string): Promise<Buffer | null> {
  const { bucket, key } = parseObjectUrl(loc);
  try {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return out.Body ? Buffer.from(await out.Body.transformToByteArray()) : Buffer.alloc(0);
  } catch (err) {
    if (s3Missing(err)) return null;
    throw storageError('read', loc, err);
  }
}

/** One PUT of the whole body. */
async function writeObject(client: S3Client, loc: string, body: Buffer, opts: WriteOptions): Promise<void> {
  const { bucket, key } = parseObjectUrl(loc);
  try {
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ...(opts.contentType ? { ContentType: opts.contentType } : {}),
        ...(opts.metadata ? { Metadata: opts.metadata } : {}),
      }),
    );
  } catch (err) {
    throw storageError('write', loc, err);
  }
}

/** Removes every object under `dir/`, a listed page at a time. */
async function removePrefix(client: S3Client, dir: string): Promise<void> {
  const { bucket, key } = parseObjectUrl(dir);
  const prefix = key === '' ? '' : `${key}/`;
  let previous = '';
  for (;;) {
    const out = await client
      .send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, MaxKeys: 1_000 }))
      .catch((err: unknown) => {
        throw storageError('remove', dir, err);
      });
    const keys = (out.Contents ?? []).flatMap((c) => (c.Key ? [{ Key: c.Key }] : []));
    if (keys.length === 0) return;
    // Deleted without an error, yet listed again: deleting them once more would go on for ever.
    const page = keys.map((k) => k.Key).join('\n');
    if (page === previous)
      throw new Error(`storage: cannot remove ${dir} (${keys.length} keys still listed after they were deleted)`);
    previous = page;
    await deleteKeys(client, bucket, dir, keys);
    if (!out.IsTruncated) return;
  }
}

/** Removes these objects of one folder, 1,000 to a request; all must be in the first one's bucket. */
async function removeObjects(client: S3Client, locs: readonly string[]): Promise<void> {
  if (locs.length === 0) return;
  const { bucket } = parseObjectUrl(locs[0]!);
  const dir = locs[0]!.slice(0, locs[0]!.lastIndexOf('/'));
  for (let at = 0; at < locs.length; at += 1_000) {
    const objects = locs.slice(at, at + 1_000).map((loc) => {
      const o = parseObjectUrl(loc);
      if (o.bucket !== bucket)
        throw new Error(`storage: cannot remove ${loc} with the files of ${dir} (another bucket)`);
      return { Key: o.key };
    });
    await deleteKeys(client, bucket, dir, objects);
  }
}

/** The object's size and version (ETag, Last-Modified, size), from a HEAD; null when there is none. */
async function statObject(client: S3Client, loc: string): Promise<{ size: number; version: string } | null> {
  const { bucket, key } = parseObjectUrl(loc);
  try {
    const out = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return {
      size: out.ContentLength ?? 0,
      version: `${out.ETag ?? ''}:${out.LastModified?.getTime() ?? ''}:${out.ContentLength ?? ''}`,
    };
  } catch (err) {
    if (s3Missing(err)) return null;
    throw storageError('read', loc, err);
  }
}

/** A local file put at `loc` by a multipart upload, each part with its SHA-256; aborted with `opts.signal`. */
async function uploadObject(client: S3Client, file: string, loc: string, opts: WriteOptions): Promise<void> {
  const { bucket, key } = parseObjectUrl(loc);
  const upload = new Upload({
    client,
    partSize: PART_BYTES,
    queueSize: 4,
    leavePartsOnError: false,
    params: {
      Bucket: bucket,
      Key: key,
      Body: createReadStream(file),
      ChecksumAlgorithm: 'SHA256',
      ...(opts.contentType ? { ContentType: opts.contentType } : {}),
      ...(opts.metadata ? { Metadata: opts.metadata } : {}),
    },
  });
  if (opts.onProgress) upload.on('httpUploadProgress', (p) => opts.onProgress!(p.loaded ?? 0));
  const abort = () => void upload.abort();
  opts.signal?.addEventListener('abort', abort, { once: true });
  try {
    await upload.done();
  } catch (err) {
    throw storageError('upload to', loc, err);
  } finally {
    opts.signal?.removeEventListener('abort', abort);
  }
}

/** The object streamed into a new local file; false when there is none. */
async function downloadObject(client: S3Client, loc: string, file: string): Promise<boolean> {
  const { bucket, key } = parseObjectUrl(loc);
  try {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    if (!out.Body) return false;
    await pipeline(out.Body as NodeJS.ReadableStream, createWriteStream(file, { flags: 'wx' }));
    return true;
  } catch (err) {
    if (s3Missing(err)) return false;
    throw storageError('read', loc, err);
  }
}

/** Names directly under `dir`: objects, and with `folders` the next level of prefixes too. */
async function listObjects(client: S3Client, dir: string, folders: boolean): Promise<string[]> {
  const { bucket, key } = parseObjectUrl(dir);
  const prefix = key === '' ? '' : `${key}/`;
  const names = new Set<string>();
  let token: string | undefined;
  try {
    do {
      const out = await client.send(
        new ListObjectsV2Command({
          Bucket: bucket,
          Prefix: prefix,
          Delimiter: '/',
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      for (const c of out.Contents ?? []) if (c.Key && c.Key !== prefix) names.add(c.Key.slice(prefix.length));
      if (folders)
        for (const p of out.CommonPrefixes ?? [])
          if (p.Prefix) names.add(p.Prefix.slice(prefix.length).replace(/\/$/, ''));
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  } catch (err) {
    throw storageError('list', dir, err);
  }
  return [...names];
}

/** One DeleteObjects request (at most 1,000 keys) of the files of `dir`, failing when any key stays. */
async function deleteKeys(client: S3Client, bucket: string, dir: string, keys: { Key: string }[]): Promise<void> {
  const deleted = await client
    .send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }))
    .catch((err: unknown) => {
      throw storageError('remove', dir, err);
    });
  // Quiet still reports each key it could not delete; what is left would mix with what comes next.
  if (deleted.Errors?.length) throw notRemoved(dir, deleted.Errors, keys.length);
}

/** DeleteObjects' per-key errors: how many, and the first S3 error code (never the keys or the messages). */
function notRemoved(dir: string, errors: readonly { Code?: string | undefined }[], of: number): Error {
  const code = errors.find((e) => e.Code && /^[A-Za-z]{1,64}$/.test(e.Code))?.Code;
  return new Error(
    `storage: cannot remove ${dir} (${errors.length} of ${of} keys could not be removed${code ? `: ${code}` : ''})`,
  );
}

/** The S3 error's name and status, not its message (which can quote a request). */
export function storageError(what: string, loc: string, err: unknown): Error {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number }; code?: string };
  const status = e.$metadata?.httpStatusCode;
  // A network failure is a plain Error: its code (ECONNREFUSED, ECONNRESET) says more than its name.
  const name = e.name === 'Error' && typeof e.code === 'string' ? e.code : (e.name ?? e.code ?? 'error');
  return new Error(`storage: cannot ${what} ${loc} (${name}${status ? `, HTTP ${status}` : ''})`, { cause: err });
}
