/**
 * A strip of tile rows for the stitcher: its tiles' bytes read (from a bucket, ahead of the decode) and each
 * tile or chunk decoded to 8-bit RGBA into its place in the strip buffer, checked and named in errors.
 */
import { dirname } from 'node:path';
import sharp from 'sharp';
import { readConfinedFile, StoreEscapeError } from '../tile-store/store-bounds';
import { StitchInputError, type StitchInput } from './stitch-input';

/** Tiles decoded at once: enough to keep libuv's four threads busy while JS copies rows. */
const DECODE_CONCURRENCY = 8;
/** Tiles read at once from a bucket (`read`): each read waits on the network, not the CPU. */
const READ_CONCURRENCY = 32;

/** The bytes of every tile and chunk of rows row0..row0+n-1, when they are read through `read`; else null. */
export async function readStrip(input: StitchInput, row0: number, n: number): Promise<Map<string, Buffer> | null> {
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

/** One strip to decode: tile rows row0..row0+n-1, into `strip`. */
export interface StripToDecode {
  row0: number;
  n: number;
  /** RGBA rows `cols * tileSize` pixels wide, zeroed (transparent black). */
  strip: Buffer;
  /** The strip's tile and chunk bytes (`readStrip`), or null for local files read as they are decoded. */
  bodies: Map<string, Buffer> | null;
}

/** Decodes tile rows row0..row0+n-1 into `strip` (RGBA rows `cols * tileSize` pixels wide). */
export async function decodeStrip(input: StitchInput, { row0, n, strip, bodies }: StripToDecode): Promise<void> {
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
