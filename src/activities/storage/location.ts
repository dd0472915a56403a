import path from 'node:path';
import { isObjectUrl, S3_SCHEME } from '../../messages/locations';

/**
 * Where a mosaic's files live: a local path, or an object in an S3-compatible bucket written as
 * `s3://bucket/key/prefix`. Both are plain strings in plans, journals and manifests, so a worker on any
 * machine reads the same plan; these helpers join and split them the way each kind needs.
 */
export { isObjectUrl, S3_SCHEME } from '../../messages/locations';

export interface ObjectAddress {
  bucket: string;
  /** The object key, or a prefix without its trailing slash (empty for the bucket's top). */
  key: string;
}

/** S3's own rule for new buckets: 3-63 lowercase letters, digits, dots and hyphens. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const MAX_KEY_BYTES = 1_024;

/**
 * Why `loc` is not a usable object URL, or null. Keys are kept canonical (no empty, `.` or `..` segment, no
 * backslash or control character), so a prefix check on them means what it says.
 */
export function objectUrlRefusal(loc: string): string | null {
  if (!isObjectUrl(loc)) return `must start with ${S3_SCHEME}`;
  const rest = loc.slice(S3_SCHEME.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const key = slash < 0 ? '' : rest.slice(slash + 1).replace(/\/$/, '');
  if (!BUCKET.test(bucket))
    return `has no valid bucket name (3-63 lowercase letters, digits, dots and hyphens; got ${JSON.stringify(bucket)})`;
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) return `has a key longer than ${MAX_KEY_BYTES} bytes`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(key)) return 'has a control character or a backslash in its key';
  if (key !== '' && key.split('/').some((s) => s === '' || s === '.' || s === '..'))
    return "has an empty, '.' or '..' segment in its key";
  return null;
}

/** Bucket and key of an object URL; throws with the reason when it is not one. */
export function parseObjectUrl(loc: string): ObjectAddress {
  const why = objectUrlRefusal(loc);
  if (why) throw new Error(`${JSON.stringify(loc)} ${why}`);
  const rest = loc.slice(S3_SCHEME.length);
  const slash = rest.indexOf('/');
  return slash < 0
    ? { bucket: rest, key: '' }
    : { bucket: rest.slice(0, slash), key: rest.slice(slash + 1).replace(/\/$/, '') };
}

export const objectUrl = (a: ObjectAddress): string => `${S3_SCHEME}${a.bucket}${a.key ? `/${a.key}` : ''}`;

/** `loc` joined with `parts` (each a single name or a relative `a/b` path of plain names). */
export function joinLocation(loc: string, ...parts: string[]): string {
  if (!isObjectUrl(loc)) return path.join(loc, ...parts);
  const a = parseObjectUrl(loc);
  const added = parts.flatMap((p) => p.split('/')).filter((s) => s !== '');
  if (added.some((s) => s === '.' || s === '..'))
    throw new Error(`cannot join ${JSON.stringify(parts.join('/'))} to an object URL`);
  return objectUrl({ bucket: a.bucket, key: [a.key, ...added].filter((s) => s !== '').join('/') });
}

/** The folder (or prefix) that holds `loc`. */
export function parentLocation(loc: string): string {
  if (!isObjectUrl(loc)) return path.dirname(loc);
  const a = parseObjectUrl(loc);
  const cut = a.key.lastIndexOf('/');
  return objectUrl({ bucket: a.bucket, key: cut < 0 ? '' : a.key.slice(0, cut) });
}

/** The last name of `loc`. */
export function baseName(loc: string): string {
  if (!isObjectUrl(loc)) return path.basename(loc);
  const { key } = parseObjectUrl(loc);
  return key.slice(key.lastIndexOf('/') + 1);
}

/** `loc` is `dir` or lies under it, as written (no I/O): for objects, on whole key segments. */
export function locationWithin(loc: string, dir: string): boolean {
  if (isObjectUrl(loc) !== isObjectUrl(dir)) return false;
  if (!isObjectUrl(loc)) {
    const p = path.resolve(loc);
    const d = path.resolve(dir);
    return p === d || p.startsWith(d.endsWith(path.sep) ? d : d + path.sep);
  }
  if (objectUrlRefusal(loc) || objectUrlRefusal(dir)) return false;
  const a = parseObjectUrl(loc);
  const b = parseObjectUrl(dir);
  return a.bucket === b.bucket && (b.key === '' || a.key === b.key || a.key.startsWith(`${b.key}/`));
}
