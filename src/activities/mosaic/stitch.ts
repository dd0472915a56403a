/**
 * Stitching a grid of tile files into one georeferenced RGBA mosaic (tiled, compressed, pyramidal TIFF, plus
 * optional PNG/WebP copies) and writing the coverage mask, in bounded memory.
 *
 * How: tiles are decoded one by one (normalised to 8-bit RGBA) into a strip buffer of a few tile rows, which is
 * written uncompressed as a VIPS `.v` file in a temporary directory beside the output; libvips then joins the
 * strips vertically and streams them into each output format, so the whole raster is never in memory. Decoding
 * tiles ourselves rather than with sharp's `join` input is about 3x faster (libvips' arrayjoin over PNG files
 * re-reads them) and lets every tile be checked and named in errors.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, readdir, rename, rm, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import sharp from 'sharp';
import { readConfinedFile, StoreEscapeError } from '../store/store-bounds';
import { writeCog } from './cog-layout';
import { staleSidecars, writeSidecars, type Bounds3857 } from './georef';

export interface StitchInput {
  cols: number;
  rows: number;
  tileSize: number;
  /**
   * The tile file for grid cell (col,row) (row 0 at the top), or a tile-sized region of a larger image (a
   * chunk, decoded once per strip for all its cells), or null for a transparent cell.
   */
  tileAt(col: number, row: number): string | ChunkRegion | null;
  /** Path of the .tif to write. */
  output: string;
  /**
   * Reads a tile or chunk named by `tileAt` (tiles in a bucket); without it they are local files. A strip's
   * tiles are read while the strip before it is decoded, so two strips' encoded tiles at most are held, and
   * nothing is copied to disk.
   */
  read?: (ref: string) => Promise<Buffer>;
  /**
   * Local tiles and chunks (no `read`) are read only as regular files inside this folder after symlinks, at the
   * moment each is read (`readConfinedFile`); without it, each only inside its own folder. A file swapped for a
   * symlink since the caller checked it fails the stitch with a StoreEscapeError, never drawn.
   */
  storeRoot?: string;
  /** Also write <output minus .tif>.png / .webp, same pixels. */
  extraFormats: ('png' | 'webp')[];
  /**
   * Sidecars (aux.xml, world file, prj) beside the .tif too. Default true. The .tif carries its georeferencing
   * inside; the PNG/WebP copies have no other, so they get theirs either way.
   */
  sidecars?: boolean;
  bounds: Bounds3857;
  /** Rows of tiles joined per strip (bounds memory). Default so that a strip is at most ~64 MiB RGBA. */
  stripRows?: number;
  /**
   * Called with the tile rows done after each strip, and repeated every few seconds with the last count
   * (the final encode has no progress of its own), so activity heartbeats keep flowing.
   */
  onProgress?: (rowsDone: number) => void;
}

/** A tile-sized region of a larger image (a chunk of a mosaic fetched without a tile cache). */
export interface ChunkRegion {
  file: string;
  left: number;
  top: number;
}

/**
 * A problem with the input that a retry cannot fix (a tile of the wrong size, a mosaic too large for WebP):
 * the assembly activity can make it non-retryable by its name.
 */
export class StitchInputError extends Error {
  override readonly name = 'StitchInputError';
}

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
/** Tiles decoded at once: enough to keep libuv's four threads busy while JS copies rows. */
const DECODE_CONCURRENCY = 8;
/** Tiles read at once from a bucket (`read`): each read waits on the network, not the CPU. */
const READ_CONCURRENCY = 32;
/** How often onProgress repeats its last count. */
const KEEPALIVE_MS = 5_000;

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
  const { cols, rows, tileSize: T, output, bounds } = input;
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

  const progress = new Progress(input.onProgress);
  // Beside the output: same filesystem for the final renames, and room for strips the size of the raster.
  const prefix = `.${basename(output)}.stitch-`;
  await removeDeadStitches(dirname(output), prefix);
  const tmpDir = await mkdtemp(join(dirname(output), prefix));
  try {
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
      await decodeStrip(input, row0, n, strip, bodies);
      const path = join(tmpDir, `strip-${String(strips.length).padStart(6, '0')}.v`);
      await sharp(strip, { raw: { width, height: n * T, channels: 4 }, limitInputPixels: false }).toFile(path);
      strips.push(path);
      progress.report(row0 + n);
    }

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
    progress.check();
    return { files, width, height };
  } finally {
    progress.stop();
    releaseCachedFiles();
    await rm(tmpDir, { recursive: true, force: true });
  }
}

/**
 * Coverage mask: one pixel per tile, 8-bit greyscale PNG: 255 ok, 208 ok from a mirror, 160 stale, 0 everything else (the values
 * come from `valueAt`, an integer 0..255); georeferenced with sidecars (pgw/prj/aux.xml) over the same bounds.
 * Returns the files written, the PNG first.
 */
export async function writeCoverageMask(
  path: string,
  cols: number,
  rows: number,
  valueAt: (col: number, row: number) => number,
  bounds: Bounds3857,
): Promise<string[]> {
  if (!Number.isInteger(cols) || cols < 1 || !Number.isInteger(rows) || rows < 1) {
    throw new RangeError(`mask: cols and rows must be positive integers (got ${cols}x${rows})`);
  }
  const pixels = Buffer.alloc(cols * rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = valueAt(c, r);
      if (!Number.isInteger(v) || v < 0 || v > 255)
        throw new RangeError(`mask: value at (${c},${r}) must be an integer 0..255 (got ${v})`);
      pixels[r * cols + c] = v;
    }
  }
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}.png`;
  try {
    // toColourspace('b-w'): without it sharp writes a one-band raw image as an RGB PNG.
    await sharp(pixels, { raw: { width: cols, height: rows, channels: 1 }, limitInputPixels: false })
      .toColourspace('b-w')
      .png()
      .toFile(tmp);
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  return [path, ...(await writeSidecars(path, bounds, cols, rows))];
}

/** Decodes tile rows row0..row0+n-1 into `strip` (RGBA rows `cols * tileSize` pixels wide). */
/** The bytes of every tile and chunk of rows row0..row0+n-1, when they are read through `read`; else null. */
async function readStrip(input: StitchInput, row0: number, n: number): Promise<Map<string, Buffer> | null> {
  const read = input.read;
  if (!read) return null;
  const refs = new Set<string>();
  for (let r = 0; r < n; r++) {
    for (let col = 0; col < input.cols; col++) {
      const at = input.tileAt(col, row0 + r);
      if (at !== null) refs.add(typeof at === 'string' ? at : at.file);
    }
  }
  const bodies = new Map<string, Buffer>();
  await pool([...refs], READ_CONCURRENCY, async (ref) => {
    bodies.set(ref, await read(ref));
  });
  return bodies;
}

async function decodeStrip(
  input: StitchInput,
  row0: number,
  n: number,
  strip: Buffer,
  bodies: Map<string, Buffer> | null,
): Promise<void> {
  const { cols, tileSize: T } = input;
  const stride = cols * T * 4;
  const cells: { col: number; row: number; file: string }[] = [];
  // Chunk regions, by chunk: each chunk is decoded once for all of its cells in this strip.
  const chunks = new Map<string, { col: number; row: number; left: number; top: number }[]>();
  for (let r = 0; r < n; r++) {
    for (let col = 0; col < cols; col++) {
      const at = input.tileAt(col, row0 + r);
      if (at === null) continue;
      if (typeof at === 'string') cells.push({ col, row: row0 + r, file: at });
      else chunks.set(at.file, [...(chunks.get(at.file) ?? []), { col, row: row0 + r, left: at.left, top: at.top }]);
    }
  }
  const place = (data: Buffer, width: number, left: number, top: number, col: number, row: number) => {
    const at = (row - row0) * T * stride + col * T * 4;
    for (let y = 0; y < T; y++)
      data.copy(strip, at + y * stride, ((top + y) * width + left) * 4, ((top + y) * width + left + T) * 4);
  };
  // Local files are read here, one per decode, so no more encoded bytes are held than tiles being decoded.
  const bytes = async (file: string, what: string) =>
    bodies?.get(file) ?? (await readLocal(file, input.storeRoot, what));
  await pool(cells, DECODE_CONCURRENCY, async ({ col, row, file }) => {
    const what = `tile (col ${col}, row ${row}) ${file}`;
    const { data, info } = await decodeRgba(await bytes(file, what), what);
    if (info.width !== T || info.height !== T) {
      throw new StitchInputError(
        `stitch: tile (col ${col}, row ${row}) ${file} is ${info.width}x${info.height} px, expected ${T}x${T}`,
      );
    }
    place(data, T, 0, 0, col, row);
  });
  // Chunks are large (a 2048 px chunk is 16 MiB decoded): two at a time.
  await pool([...chunks.entries()], 2, async ([file, regions]) => {
    const { data, info } = await decodeRgba(await bytes(file, `chunk ${file}`), `chunk ${file}`);
    for (const g of regions) {
      if (g.left < 0 || g.top < 0 || g.left + T > info.width || g.top + T > info.height) {
        throw new StitchInputError(
          `stitch: chunk ${file} is ${info.width}x${info.height} px, too small for a tile at ${g.left},${g.top}`,
        );
      }
      place(data, info.width, g.left, g.top, g.col, g.row);
    }
  });
}

/** A local tile or chunk's bytes, confined as it is read; an error names the tile. */
async function readLocal(file: string, storeRoot: string | undefined, what: string): Promise<Buffer> {
  try {
    return await readConfinedFile(file, storeRoot ?? dirname(file));
  } catch (err) {
    if (err instanceof StoreEscapeError) throw new StoreEscapeError(`stitch: ${what}: ${err.message}`, { cause: err });
    throw new Error(`stitch: cannot read ${what} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { cause: err });
  }
}

/** Any image to 8-bit sRGB + alpha: RGB/JPEG get opaque alpha; palette, grey and 16-bit are expanded. */
async function decodeRgba(file: Buffer, what: string): Promise<{ data: Buffer; info: sharp.OutputInfo }> {
  let out: { data: Buffer; info: sharp.OutputInfo };
  try {
    out = await sharp(file, { failOn: 'truncated', limitInputPixels: false })
      .toColourspace('srgb')
      .ensureAlpha(1)
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
  } catch (err) {
    const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new Error(`stitch: cannot decode ${what}: ${message}`, { cause: err });
  }
  if (out.info.channels !== 4)
    throw new Error(`stitch: ${what} decoded to ${out.info.channels} channels, expected RGBA`);
  return out;
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

/** Runs `fn` over `items`, `limit` at a time; stops starting new ones after a failure and waits for the rest. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  let firstError: unknown;
  const worker = async () => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        if (!failed) firstError = err;
        failed = true;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed) throw firstError;
}

/** onProgress calls, repeated on a timer so slow steps still heartbeat; an error thrown by the callback fails the stitch. */
class Progress {
  private readonly timer: NodeJS.Timeout | undefined;
  private last = 0;
  private error: { err: unknown } | undefined;

  constructor(private readonly onProgress: ((rowsDone: number) => void) | undefined) {
    if (onProgress) {
      this.timer = setInterval(() => this.call(this.last), KEEPALIVE_MS);
      this.timer.unref();
    }
  }

  report(rowsDone: number): void {
    this.last = rowsDone;
    this.call(rowsDone);
    this.check();
  }

  /** Throws what the callback threw (the timer cannot throw into the encode it runs beside). */
  check(): void {
    if (this.error) throw this.error.err;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private call(rowsDone: number): void {
    if (!this.onProgress || this.error) return;
    try {
      this.onProgress(rowsDone);
    } catch (err) {
      this.error = { err };
    }
  }
}
