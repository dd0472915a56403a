import path from 'node:path';
import { objectUrlRefusal } from '../storage/location';

/**
 * Where a worker may read requesters' files and write their outputs. Anyone who can start a workflow on the
 * task queue chooses these paths, so the worker checks each one against roots its operator configured.
 */
export interface WorkerRoots {
  /** Folders sources files are read from (`sourcesFile`, `mosaic redrive --sources`). */
  sources: readonly string[];
  /** Folders outputs, tile stores, work folders and stitch strips are written under (and manifests read from). */
  outputs: readonly string[];
  /**
   * Bucket prefixes (`s3://bucket/prefix`) outputs, tile stores and work folders may be written under; none
   * means no object storage at all.
   */
  buckets?: readonly string[];
}

export const SOURCES_DIR_ENV = 'TILEBREAKER_SOURCES_DIR';
export const OUTPUT_DIR_ENV = 'TILEBREAKER_OUTPUT_DIR';
export const OUTPUT_BUCKETS_ENV = 'TILEBREAKER_OUTPUT_BUCKETS';

/** A list of folders as PATH writes them (`:` between them); empty entries are ignored. */
function parseRootList(value: string | undefined): string[] {
  return (value ?? '')
    .split(path.delimiter)
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/**
 * The roots from TILEBREAKER_SOURCES_DIR and TILEBREAKER_OUTPUT_DIR (each a `:`-separated list), each
 * defaulting to the worker's working directory; relative entries are taken from it too.
 */
export function rootsFromEnv(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): WorkerRoots {
  const list = (name: string) => {
    const given = parseRootList(env[name]);
    return (given.length ? given : [cwd]).map((p) => path.resolve(cwd, p));
  };
  const buckets = checkBuckets(parseBucketList(env[OUTPUT_BUCKETS_ENV]), OUTPUT_BUCKETS_ENV);
  return { sources: list(SOURCES_DIR_ENV), outputs: list(OUTPUT_DIR_ENV), ...(buckets.length ? { buckets } : {}) };
}

/** Each entry must be a bucket prefix as `s3://bucket/prefix` writes it: a worker refuses to start otherwise. */
function checkBuckets(list: readonly string[], field: string): string[] {
  for (const b of list) {
    const why = objectUrlRefusal(b);
    if (why) throw new Error(`${field}: ${JSON.stringify(b)} ${why}`);
  }
  return [...list];
}

/** `s3://bucket/prefix` entries separated by commas or white space (a URL has colons, so not PATH's form). */
export function parseBucketList(value: string | undefined): string[] {
  return (value ?? '')
    .split(/[\s,]+/)
    .map((p) => p.trim().replace(/\/+$/, ''))
    .filter((p) => p !== '');
}

/** Roots with explicit lists in place of the environment's (the worker command's --sources-dir / --output-dir). */
export function withRoots(
  base: WorkerRoots,
  override: { sources?: readonly string[]; outputs?: readonly string[]; buckets?: readonly string[] },
  cwd: string = process.cwd(),
): WorkerRoots {
  const abs = (list: readonly string[]) => list.map((p) => path.resolve(cwd, p));
  const buckets = override.buckets?.length ? override.buckets.map((b) => b.replace(/\/+$/, '')) : base.buckets;
  return {
    sources: override.sources?.length ? abs(override.sources) : base.sources,
    outputs: override.outputs?.length ? abs(override.outputs) : base.outputs,
    ...(buckets ? { buckets: checkBuckets(buckets, '--output-bucket') } : {}),
  };
}
