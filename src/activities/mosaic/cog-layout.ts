/**
 * A Cloud Optimized GeoTIFF from the pyramidal tiled TIFF sharp writes, with its georeferencing inside.
 *
 * libvips writes each level's tiles before its IFD and the full resolution first, so a reader of a bucket must
 * fetch the whole file to find an overview; and it writes no GeoTIFF tags (its tiffsave takes none). The COG
 * layout asks for every IFD first (full resolution, then the overviews from largest to smallest), then the
 * tiles from the smallest overview to the full resolution. This rewrites the file so: the IFDs are copied with
 * their values, the GeoTIFF tags added to the first (ModelPixelScale, ModelTiepoint and a GeoKeyDirectory for
 * EPSG:3857, pixel is area), and the compressed tiles copied byte for byte, only their offsets changed. The
 * prototype this was ported from took 0.15 s and 53 MB on a 4096 x 4096 RGBA mosaic beside sharp's 2.3 s
 * encode (gdal_translate -of COG: 3.7 s); this port has not been timed on its own.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { KNOWN_CRS } from '../../geo/crs';
import { boundsEpsg, type Bounds3857 } from './georef';

/** Bytes per value of each TIFF field type. */
const TYPE_SIZE: Readonly<Record<number, number>> = {
  1: 1,
  2: 1,
  3: 2,
  4: 4,
  5: 8,
  6: 1,
  7: 1,
  8: 2,
  9: 4,
  10: 8,
  11: 4,
  12: 8,
  13: 4,
  16: 8,
  17: 8,
  18: 8,
};
const TAG = {
  ImageWidth: 256,
  ImageLength: 257,
  TileOffsets: 324,
  TileByteCounts: 325,
  ModelPixelScale: 33550,
  ModelTiepoint: 33922,
  GeoKeyDirectory: 34735,
} as const;
const GEO_TAGS: readonly number[] = [TAG.ModelPixelScale, TAG.ModelTiepoint, TAG.GeoKeyDirectory];

interface Entry {
  tag: number;
  type: number;
  count: number;
  bytes: Buffer;
}

/** Classic TIFF or BigTIFF: the sizes of its header, counts, entries and offsets. */
interface Format {
  big: boolean;
  head: number;
  count: number;
  entry: number;
  off: number;
}

interface Level {
  ifd: Entry[];
  width: number;
  offsets: number[];
  counts: number[];
  at: number;
  newOffsets: number[];
}

async function readAt(fh: FileHandle, pos: number, len: number): Promise<Buffer> {
  const b = Buffer.alloc(len);
  const { bytesRead } = await fh.read(b, 0, len, pos);
  if (bytesRead !== len) throw new Error(`cog: short read at ${pos} (wanted ${len}, got ${bytesRead})`);
  return b;
}

const offsetAt = (f: Format, b: Buffer, o: number) => (f.big ? Number(b.readBigUInt64LE(o)) : b.readUInt32LE(o));

/** The IFD chain of a little-endian classic TIFF or BigTIFF (what sharp writes). */
async function readIfds(fh: FileHandle): Promise<{ f: Format; ifds: Entry[][] }> {
  const head = await readAt(fh, 0, 16);
  if (head.toString('latin1', 0, 2) !== 'II') throw new Error('cog: only a little-endian TIFF is rewritten');
  const magic = head.readUInt16LE(2);
  if (magic !== 42 && magic !== 43) throw new Error(`cog: not a TIFF (magic ${magic})`);
  const big = magic === 43;
  const f: Format = big
    ? { big, head: 16, count: 8, entry: 20, off: 8 }
    : { big, head: 8, count: 2, entry: 12, off: 4 };
  let next = offsetAt(f, head, big ? 8 : 4);
  const ifds: Entry[][] = [];
  while (next !== 0) {
    if (ifds.length > 64) throw new Error('cog: more than 64 IFDs (a loop in the chain?)');
    const countBuf = await readAt(fh, next, f.count);
    const n = big ? Number(countBuf.readBigUInt64LE(0)) : countBuf.readUInt16LE(0);
    const body = await readAt(fh, next + f.count, n * f.entry + f.off);
    const entries: Entry[] = [];
    for (let i = 0; i < n; i++) {
      const o = i * f.entry;
      const tag = body.readUInt16LE(o);
      const type = body.readUInt16LE(o + 2);
      const count = big ? Number(body.readBigUInt64LE(o + 4)) : body.readUInt32LE(o + 4);
      const size = (TYPE_SIZE[type] ?? 1) * count;
      const valueAt = o + (big ? 12 : 8);
      const bytes =
        size <= f.off
          ? Buffer.from(body.subarray(valueAt, valueAt + size))
          : await readAt(fh, offsetAt(f, body, valueAt), size);
      entries.push({ tag, type, count, bytes });
    }
    ifds.push(entries);
    next = offsetAt(f, body, n * f.entry);
  }
  return { f, ifds };
}

function numbers(e: Entry | undefined, what: string): number[] {
  if (!e) throw new Error(`cog: an IFD has no ${what}`);
  return Array.from({ length: e.count }, (_, i) =>
    e.type === 3
      ? e.bytes.readUInt16LE(i * 2)
      : e.type === 16
        ? Number(e.bytes.readBigUInt64LE(i * 8))
        : e.bytes.readUInt32LE(i * 4),
  );
}

function doubles(tag: number, vs: number[]): Entry {
  const bytes = Buffer.alloc(vs.length * 8);
  vs.forEach((v, i) => bytes.writeDoubleLE(v, i * 8));
  return { tag, type: 12, count: vs.length, bytes };
}

function shorts(tag: number, vs: number[]): Entry {
  const bytes = Buffer.alloc(vs.length * 2);
  vs.forEach((v, i) => bytes.writeUInt16LE(v, i * 2));
  return { tag, type: 3, count: vs.length, bytes };
}

/** The GeoTIFF tags of a north-up raster of `width` x `height` pixels over `bounds`, in EPSG:3857 or the bounds' own CRS. */
export function geoTags(bounds: Bounds3857, width: number, height: number): Entry[] {
  const code = boundsEpsg(bounds);
  // GeoKey directory 1.1.0 with 3 keys: GTModelType, GTRasterType pixel is area, and the CRS's EPSG code as
  // ProjectedCSType (model type 1), or as GeographicType (model type 2) for one in degrees (x longitude, y latitude).
  const geographic = KNOWN_CRS[code]?.geographic === true;
  const keys = geographic
    ? [1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 1, 2048, 0, 1, code]
    : [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, code];
  return [
    doubles(TAG.ModelPixelScale, [(bounds.maxX - bounds.minX) / width, (bounds.maxY - bounds.minY) / height, 0]),
    doubles(TAG.ModelTiepoint, [0, 0, 0, bounds.minX, bounds.maxY, 0]),
    shorts(TAG.GeoKeyDirectory, keys),
  ];
}

/** Rewrites the pyramidal tiled TIFF at `input` as a COG at `output`, georeferenced over `bounds` (EPSG:3857). */
export async function writeCog(input: string, output: string, bounds: Bounds3857): Promise<void> {
  const src = await open(input, 'r');
  try {
    const { f, levels } = await readLevels(src, bounds);
    const { ifdsEnd, end } = layOut(f, levels);
    const head = encodeHead(f, levels, ifdsEnd);
    const dst = await open(output, 'w');
    try {
      await dst.write(head, 0, head.length, 0);
      const written = await copyTiles(src, dst, levels, head.length);
      if (written !== end) throw new Error(`cog: wrote ${written} bytes where ${end} were laid out`);
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
}

/**
 * The file's levels in COG order (full resolution first, then the overviews from the largest), the GeoTIFF
 * tags over `bounds` in the first, each IFD's entries sorted by tag.
 */
async function readLevels(src: FileHandle, bounds: Bounds3857): Promise<{ f: Format; levels: Level[] }> {
  const { f, ifds } = await readIfds(src);
  const levels: Level[] = ifds.map((ifd) => ({
    ifd,
    width: numbers(
      ifd.find((e) => e.tag === TAG.ImageWidth),
      'ImageWidth',
    )[0]!,
    offsets: numbers(
      ifd.find((e) => e.tag === TAG.TileOffsets),
      'TileOffsets (the TIFF is not tiled)',
    ),
    counts: numbers(
      ifd.find((e) => e.tag === TAG.TileByteCounts),
      'TileByteCounts',
    ),
    at: 0,
    newOffsets: [],
  }));
  // Full resolution first, then the overviews from the largest.
  levels.sort((a, b) => b.width - a.width);
  const main = levels[0]!;
  const height = numbers(
    main.ifd.find((e) => e.tag === TAG.ImageLength),
    'ImageLength',
  )[0]!;
  main.ifd = [...main.ifd.filter((e) => !GEO_TAGS.includes(e.tag)), ...geoTags(bounds, main.width, height)];
  for (const l of levels) l.ifd.sort((a, b) => a.tag - b.tag);
  return { f, levels };
}

/**
 * Places every IFD block after the header (sets each level's `at`), then every tile after them (its
 * `newOffsets`); returns where the IFDs end and where the file ends.
 */
function layOut(f: Format, levels: Level[]): { ifdsEnd: number; end: number } {
  // Each IFD block: its entries, then its values that do not fit an entry (word aligned).
  const blockSize = (ifd: Entry[]) =>
    ifd.reduce(
      (size, e) => size + (e.bytes.length > f.off ? e.bytes.length + (e.bytes.length & 1) : 0),
      f.count + ifd.length * f.entry + f.off,
    );
  let pos = f.head;
  for (const l of levels) {
    l.at = pos;
    pos += blockSize(l.ifd);
  }
  const ifdsEnd = pos;
  // The tiles: the smallest overview first, the full resolution last.
  for (const l of [...levels].reverse()) {
    l.newOffsets = l.offsets.map((_, i) => {
      if (l.counts[i] === 0) return 0;
      const at = pos;
      pos += l.counts[i]!;
      return at;
    });
  }
  if (!f.big && pos > 2 ** 32 - 1) throw new Error(`cog: ${pos} bytes do not fit a classic TIFF`);
  return { ifdsEnd, end: pos };
}

/** The file's first `ifdsEnd` bytes: the TIFF header, then each level's IFD block where `layOut` placed it. */
function encodeHead(f: Format, levels: Level[], ifdsEnd: number): Buffer {
  const head = Buffer.alloc(ifdsEnd);
  head.write('II', 0, 'latin1');
  if (f.big) {
    head.writeUInt16LE(43, 2);
    head.writeUInt16LE(8, 4);
    head.writeBigUInt64LE(BigInt(f.head), 8);
  } else {
    head.writeUInt16LE(42, 2);
    head.writeUInt32LE(f.head, 4);
  }
  levels.forEach((l, li) => encodeIfd(f, head, l, li + 1 < levels.length ? levels[li + 1]!.at : 0));
  return head;
}

/** One level's IFD block into `head` at `l.at`, its tile offsets the new ones, chained to the IFD at `nextAt`. */
function encodeIfd(f: Format, head: Buffer, l: Level, nextAt: number): void {
  const writeOffset = (o: number, v: number) =>
    f.big ? head.writeBigUInt64LE(BigInt(v), o) : head.writeUInt32LE(v, o);
  let p = l.at;
  if (f.big) head.writeBigUInt64LE(BigInt(l.ifd.length), p);
  else head.writeUInt16LE(l.ifd.length, p);
  p += f.count;
  let extra = l.at + f.count + l.ifd.length * f.entry + f.off;
  for (const e of l.ifd) {
    let bytes = e.bytes;
    if (e.tag === TAG.TileOffsets) {
      bytes = Buffer.alloc(e.bytes.length);
      l.newOffsets.forEach((v, i) =>
        e.type === 16 ? bytes.writeBigUInt64LE(BigInt(v), i * 8) : bytes.writeUInt32LE(v, i * 4),
      );
    }
    head.writeUInt16LE(e.tag, p);
    head.writeUInt16LE(e.type, p + 2);
    if (f.big) head.writeBigUInt64LE(BigInt(e.count), p + 4);
    else head.writeUInt32LE(e.count, p + 4);
    const valueAt = p + (f.big ? 12 : 8);
    if (bytes.length <= f.off) bytes.copy(head, valueAt);
    else {
      writeOffset(valueAt, extra);
      bytes.copy(head, extra);
      extra += bytes.length + (bytes.length & 1);
    }
    p += f.entry;
  }
  writeOffset(p, nextAt);
}

/**
 * Copies every level's tiles from `src` into `dst` from `start` on, in the order `layOut` placed them (the
 * smallest overview first); returns the bytes written in all, the head's included.
 */
async function copyTiles(src: FileHandle, dst: FileHandle, levels: Level[], start: number): Promise<number> {
  let written = start;
  // Tiles that lie one after another in sharp's file are copied as one run, through an 8 MiB buffer.
  const buf = Buffer.alloc(8 << 20);
  const copy = async (from: number, len: number) => {
    while (len > 0) {
      const n = Math.min(len, buf.length);
      const { bytesRead } = await src.read(buf, 0, n, from);
      if (bytesRead !== n) throw new Error(`cog: short read at ${from}`);
      await dst.write(buf, 0, n, written);
      written += n;
      from += n;
      len -= n;
    }
  };
  for (const l of [...levels].reverse()) {
    const order = l.newOffsets
      .map((_, i) => i)
      .filter((i) => l.counts[i]! > 0)
      .sort((a, b) => l.newOffsets[a]! - l.newOffsets[b]!);
    let runFrom = -1;
    let runLen = 0;
    for (const i of order) {
      if (runFrom >= 0 && l.offsets[i] === runFrom + runLen) runLen += l.counts[i]!;
      else {
        if (runLen) await copy(runFrom, runLen);
        runFrom = l.offsets[i]!;
        runLen = l.counts[i]!;
      }
    }
    if (runLen) await copy(runFrom, runLen);
  }
  return written;
}
