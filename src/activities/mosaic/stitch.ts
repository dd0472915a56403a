/**
 * Stitching a grid of tile files into one georeferenced RGBA mosaic (tiled, compressed, pyramidal TIFF, plus
 * optional PNG/WebP copies) and writing the coverage mask (coverage-mask.ts), in bounded memory.
 *
 * How: tiles are decoded one by one (normalised to 8-bit RGBA) into a strip buffer of a few tile rows, which is
 * written uncompressed as a VIPS `.v` file in a temporary directory beside the output; libvips then joins the
 * strips vertically and streams them into each output format, so the whole raster is never in memory. Decoding
 * tiles ourselves rather than with sharp's `join` input is about 3x faster (libvips' arrayjoin over PNG files
 * re-reads them) and lets every tile be checked and named in errors.
 */
import { lstat, mkdtemp, readdir, rename, rm, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import sharp from 'sharp';
import { writeCog } from './cog-layout';
import { staleSidecars, writeSidecars } from './georef';
import { StitchInputError, type StitchInput } from './stitch-input';
import { Progress } from './stitch-progress';
import { decodeStrip, readStrip } from './stitch-strips';

export { StitchInputError, type ChunkRegion, type StitchInput } from './stitch-input';
export { writeCoverageMask } from './coverage-mask';

/** Strip budget for the default `stripRows`. */
const STRIP_BYTES = 64 * 1024 * 1024;
/** sharp's default limitInputPixels, which also applies to each strip when they are joined. */
const JOIN_INPUT_PIXEL_LIMIT = 0x3fff * 0x3fff;
/** WebP's largest dimension. */
const WEBP_MAX_SIDE = 16383;
/**
 * libwebp encodes a whole picture in memory (no streaming): measured ~18 bytes a pixel at lossless effort 0
 * (~35 at the default effort), so 8192 x 8192 peaks near 1.2 GiB. Larger WebP copies are refused.
 */
const WEBP_MAX_PIXELS = 8192 * 8192;
/**
 * Why a grid cannot be stitched into these outputs, or null: the planner refuses such a mosaic before any
 * fetch, the stitcher again before any work.
 */
export function outputRefusal(cols: number, rows: number, tileSize: number, extras: readonly string[]): string | null {
  const width = cols * tileSize;
  const height = rows * tileSize;
  if (
    extras.includes('webp') &&
    (width > WEBP_MAX_SIDE || height > WEBP_MAX_SIDE || width * height > WEBP_MAX_PIXELS)
  ) {
    return (
      `a ${width}x${height} mosaic is too large for a WebP copy (at most ${WEBP_MAX_SIDE} px a side and ` +
      `${WEBP_MAX_PIXELS} pixels: libwebp holds the whole image in memory); drop 'webp' or use 'png'`
    );
  }
  if (width * tileSize > JOIN_INPUT_PIXEL_LIMIT) {
    return `${cols} columns of ${tileSize} px tiles is too wide (one tile row exceeds ${JOIN_INPUT_PIXEL_LIMIT} pixels)`;
  }
  return null;
}

/** A stitch folder nothing has written to for this long belongs to an attempt that is gone. */
const DEAD_STITCH_MS = 120_000;

/**
 * Removes strips left by an earlier stitch of the same output that was killed (they are as large as the raster).
 * One whose folder or files changed lately may be another attempt still running (a re-drive under its own id):
 * it is left to that attempt, or to the next stitch.
 */
async function removeDeadStitches(dir: string, prefix: string): Promise<void> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith(prefix));
  for (const name of names) {
    const folder = join(dir, name);
    try {
      // Only real folders a stitch made: a symlink is not followed out of the output's folder.
      if (!(await lstat(folder)).isDirectory()) continue;
      const entries = await readdir(folder);
      const times = await Promise.all(
        [folder, ...entries.map((e) => join(folder, e))].map(async (f) => (await lstat(f)).mtimeMs),
      );
      if (Date.now() - Math.max(...times) > DEAD_STITCH_MS) await rm(folder, { recursive: true, force: true });
    } catch {
      // Gone meanwhile, or not ours to read: left alone.
    }
  }
}

/**
 * Stitches the grid into `output` (a Cloud Optimized GeoTIFF: tiled 256 px, deflate + horizontal predictor,
 * RGBA with overviews, EPSG:3857 GeoTIFF tags inside) and the `extraFormats` beside it, each georeferenced by
 * sidecars (aux.xml, world file, prj; the .tif's only when `sidecars` is not false). Every output is
 * written under a temporary name and renamed into place, so a retry overwrites cleanly. Returns the files
 * written (images and sidecars) and the mosaic's size in pixels.
 */
export async function stitchMosaic(input: StitchInput): Promise<{ files: string[]; width: number; height: number }> {
  const shape = stitchShape(input);
  const { output } = input;
  const progress = new Progress(input.onProgress);
  // Beside the output: same filesystem for the final renames, and room for strips the size of the raster.
  const prefix = `.${basename(output)}.stitch-`;
  await removeDeadStitches(dirname(output), prefix);
  const tmpDir = await mkdtemp(join(dirname(output), prefix));
  try {
    const job: StitchJob = { input, ...shape, tmpDir, progress };
    const strips = await writeStrips(job);
    const written = await encodeOutputs(job, strips);
    const files = await placeOutputs(job, written);
    progress.check();
    return { files, width: shape.width, height: shape.height };
  } finally {
    progress.stop();
    releaseCachedFiles();
    await rm(tmpDir, { recursive: true, force: true });
  }
}

/** The mosaic's size and strips, from an input checked before any work. */
interface StitchShape {
  width: number;
  height: number;
  /** The extra formats, each once. */
  extras: ('png' | 'webp')[];
  /** Bytes of one row of tiles, RGBA. */
  rowBytes: number;
  /** Rows of tiles per strip. */
  stripRows: number;
}

/** One stitch under way: its input and shape, its temporary folder, its progress. */
interface StitchJob extends StitchShape {
  input: StitchInput;
  tmpDir: string;
  progress: Progress;
}

/** Checks the input (RangeError, or StitchInputError for a mosaic these outputs cannot hold) and sizes it. */
function stitchShape(input: StitchInput): StitchShape {
  const { cols, rows, tileSize: T, output } = input;
  for (const [name, v] of [
    ['cols', cols],
    ['rows', rows],
    ['tileSize', T],
  ] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`stitch: ${name} must be a positive integer (got ${v})`);
  }
  if (!/\.tiff?$/i.test(output)) throw new RangeError(`stitch: output must be a .tif or .tiff path (got ${output})`);
  const width = cols * T;
  const height = rows * T;
  const extras = [...new Set(input.extraFormats)];
  for (const f of extras)
    if (f !== 'png' && f !== 'webp') throw new RangeError(`stitch: unknown extra format ${String(f)}`);
  const rowBytes = width * T * 4;
  const refused = outputRefusal(cols, rows, T, extras);
  if (refused) throw new StitchInputError(`stitch: ${refused}`);
  let stripRows = input.stripRows ?? Math.max(1, Math.floor(STRIP_BYTES / rowBytes));
  if (!Number.isInteger(stripRows) || stripRows < 1)
    throw new RangeError(`stitch: stripRows must be a positive integer (got ${stripRows})`);
  // A strip must stay under the pixel limit sharp applies to each joined input.
  stripRows = Math.min(stripRows, rows, Math.floor(JOIN_INPUT_PIXEL_LIMIT / (width * T)));
  return { width, height, extras, rowBytes, stripRows };
}

/** Decodes the grid strip by strip into uncompressed `.v` files in the job's folder; returns them, top first. */
async function writeStrips(job: StitchJob): Promise<string[]> {
  const { input, width, rowBytes, stripRows, tmpDir, progress } = job;
  const { rows, tileSize: T } = input;
  const strips: string[] = [];
  // One buffer reused for every strip: allocating 64 MiB per strip leaves several to the GC at once.
  const buffer = Buffer.alloc(stripRows * rowBytes);
  // Tiles in a bucket: the next strip's are read while this one is decoded and written.
  const prefetch = (row0: number) => {
    const p = readStrip(input, row0, Math.min(stripRows, rows - row0));
    p.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
    return p;
  };
  let next = prefetch(0);
  for (let row0 = 0; row0 < rows; row0 += stripRows) {
    const n = Math.min(stripRows, rows - row0);
    const strip = buffer.subarray(0, n * rowBytes);
    strip.fill(0); // transparent black for null cells
    const bodies = await next;
    if (row0 + stripRows < rows) next = prefetch(row0 + stripRows);
    await decodeStrip(input, { row0, n, strip, bodies });
    const path = join(tmpDir, `strip-${String(strips.length).padStart(6, '0')}.v`);
    await sharp(strip, { raw: { width, height: n * T, channels: 4 }, limitInputPixels: false }).toFile(path);
    strips.push(path);
    progress.report(row0 + n);
  }
  return strips;
}

/** Encodes the COG and the extra formats from the strips into the job's folder; returns [temp, final] pairs. */
async function encodeOutputs(job: StitchJob, strips: string[]): Promise<[string, string][]> {
  const { input, width, height, extras, tmpDir, progress } = job;
  const { output, bounds } = input;
  const written: [string, string][] = []; // [temp, final]
  const tif = join(tmpDir, 'mosaic.tif');
  await joined(strips, width, height)
    .tiff({
      compression: 'deflate',
      predictor: 'horizontal',
      tile: true,
      tileWidth: 256,
      tileHeight: 256,
      pyramid: true,
      // Classic TIFF offsets are 32-bit: go big when the (barely compressible, worst case) file may pass 4 GiB.
      bigtiff: width * height * 4 * (4 / 3) > 0.9 * 2 ** 32,
    })
    .toFile(tif);
  // In COG order, with its georeferencing inside: a copy of the .tif alone is a GeoTIFF (cog-layout.ts).
  const cog = join(tmpDir, 'mosaic.cog.tif');
  await writeCog(tif, cog, bounds);
  await unlink(tif);
  written.push([cog, output]);
  progress.check();
  const stem = output.replace(/\.tiff?$/i, '');
  for (const format of extras) {
    const tmp = join(tmpDir, `mosaic.${format}`);
    const image = joined(strips, width, height);
    // Lossless and `exact` so the copies hold the TIFF's pixels, colour under transparent pixels included.
    // WebP effort 0: half the memory and a quarter of the time of the default, for a larger file.
    await (format === 'png' ? image.png() : image.webp({ lossless: true, exact: true, effort: 0 })).toFile(tmp);
    written.push([tmp, `${stem}.${format}`]);
    progress.check();
  }
  return written;
}

/** Renames the encoded outputs into place and writes their sidecars; returns the files, images first. */
async function placeOutputs(job: StitchJob, written: [string, string][]): Promise<string[]> {
  const { input, width, height, extras } = job;
  const { output, bounds } = input;
  const files: string[] = [];
  for (const [tmp, final] of written) {
    await rename(tmp, final);
    files.push(final);
  }
  for (const [, final] of written) {
    if (final === output && input.sidecars === false) continue;
    for (const f of await writeSidecars(final, bounds, width, height)) if (!files.includes(f)) files.push(f);
  }
  // Without sidecars, those an earlier run left would describe another grid (an output in a bucket: assemble.ts).
  if (input.sidecars === false)
    await Promise.all(staleSidecars(output, extras.length > 0).map((f) => rm(f, { force: true })));
  return files;
}

/**
 * The strips joined top to bottom, read sequentially (libvips streams them into the encoder). arrayjoin makes
 * every cell as tall as the tallest strip, so a shorter last strip is padded below: crop back to the mosaic.
 */
function joined(strips: string[], width: number, height: number): sharp.Sharp {
  return strips.length === 1
    ? sharp(strips[0], { limitInputPixels: false, sequentialRead: true })
    : sharp(strips, { join: { across: 1 }, sequentialRead: true }).extract({ left: 0, top: 0, width, height });
}

/**
 * libvips' operation cache keeps the strips' loads, with their files open, after the join: deleted strips
 * would hold their disk space until evicted. Setting the cache's file limit to 0 drops every entry holding a
 * file (a momentary, process-wide change that costs other work only a cache miss); then the limit is restored.
 */
function releaseCachedFiles(): void {
  const { files } = sharp.cache();
  sharp.cache({ files: 0 });
  sharp.cache({ files: files.max });
}
