import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { baseName, joinLocation, parentLocation } from '../storage/location';
import { storageFor } from '../storage/storage';

/** `TILEBREAKER_SCRATCH_DIR`: where a worker stitches outputs bound for a bucket (default: the system's temp folder). */
export const SCRATCH_DIR_ENV = 'TILEBREAKER_SCRATCH_DIR';

/**
 * A private folder for one assembly's local files, removed afterwards whatever happened. It needs room for
 * the raster's strips (4 bytes a pixel) plus the encoded outputs; the operator chooses where, not a requester.
 */
export class Scratch {
  private constructor(readonly dir: string) {}

  static async open(env: NodeJS.ProcessEnv = process.env): Promise<Scratch> {
    return new Scratch(await mkdtemp(path.join(env[SCRATCH_DIR_ENV] || tmpdir(), 'tilebreaker-assemble-')));
  }

  /** The scratch file standing for `loc`. */
  at(loc: string): string {
    return path.join(this.dir, baseName(loc));
  }

  async close(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Content types of what the assembly writes, for the objects' metadata. */
const CONTENT_TYPES: Record<string, string> = {
  '.tif': 'image/tiff',
  '.tiff': 'image/tiff',
  '.png': 'image/png',
  '.webp': 'image/webp',
  '.xml': 'application/xml',
  '.prj': 'text/plain',
};

/**
 * Files made in `scratch` uploaded beside `target` (same names), returning where they are now; without a
 * scratch folder they were written in place and are returned as they are. Sidecars go after their image.
 */
export async function publish(scratch: Scratch | null, files: string[], target: string): Promise<string[]> {
  if (!scratch) return files;
  const dir = parentLocation(target);
  const storage = storageFor(target);
  const out: string[] = [];
  for (const file of files) {
    const loc = joinLocation(dir, path.basename(file));
    const contentType = CONTENT_TYPES[path.extname(file).toLowerCase()];
    await storage.upload(file, loc, contentType ? { contentType } : {});
    out.push(loc);
  }
  return out;
}
