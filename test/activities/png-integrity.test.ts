import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { crc32, deflateSync, inflateSync } from 'node:zlib';
import sharp from 'sharp';
import { checkImage, LIMIT_INPUT_PIXELS } from '../../src/activities/validate/image-check';
import { unfilterRows, verifyPng } from '../../src/activities/validate/png-integrity';
import { blankImage, gradientImage } from '../helpers/images';
import { prng } from '../helpers/prng';

/** A PNG built by hand, so every field and every filter byte is under the test's control. */
function encodePng(o: {
  width: number;
  height: number;
  colourType: 0 | 2 | 3 | 4 | 6;
  pixel: (x: number, y: number) => number[];
  filter?: (y: number) => number;
  palette?: Buffer;
  trns?: Buffer;
  extraChunks?: [string, Buffer][];
  interlace?: number;
  heightInHeader?: number;
  /** Writes tRNS before PLTE (out of place). */
  trnsFirst?: boolean;
  asIs?: boolean;
}): Buffer {
  const rows: Buffer[] = [];
  let prevRaw = Buffer.alloc(o.width * 4);
  for (let y = 0; y < o.height; y++) {
    const raw = Buffer.from(Array.from({ length: o.width }, (_, x) => o.pixel(x, y)).flat());
    const filter = o.filter?.(y) ?? 0;
    // Filtered as an encoder does, so the image is what pixel() says whatever the filter; unless `asIs`, where
    // the bytes are written unfiltered under the filter byte (a valid file of other pixels, or a corrupt one).
    const row =
      o.asIs || filter > 4
        ? raw
        : Buffer.from(raw.map((v, i) => (v - predict(filter, raw, prevRaw, i, raw.length / o.width)) & 0xff));
    rows.push(Buffer.concat([Buffer.from([filter]), row]));
    prevRaw = raw;
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(o.width, 0);
  ihdr.writeUInt32BE(o.heightInHeader ?? o.height, 4);
  ihdr.set([8, o.colourType, 0, 0, o.interlace ?? 0], 8);
  const chunks: [string, Buffer][] = [['IHDR', ihdr]];
  if (o.trns && o.trnsFirst) chunks.push(['tRNS', o.trns]);
  if (o.palette) chunks.push(['PLTE', o.palette]);
  if (o.trns && !o.trnsFirst) chunks.push(['tRNS', o.trns]);
  chunks.push(...(o.extraChunks ?? []));
  const z = deflateSync(Buffer.concat(rows));
  // Split like libpng does, so several IDATs are the normal case.
  for (let i = 0; i < z.length; i += 8192) chunks.push(['IDAT', z.subarray(i, i + 8192)]);
  chunks.push(['IEND', Buffer.alloc(0)]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    ...chunks.map(([t, d]) => chunk(t, d)),
  ]);
}

/** The PNG filter predictors (a: left, b: above, c: above-left). */
function predict(filter: number, row: Buffer, above: Buffer, i: number, bpp: number): number {
  const a = i >= bpp ? row[i - bpp]! : 0;
  const b = above[i] ?? 0;
  const c = i >= bpp ? (above[i - bpp] ?? 0) : 0;
  if (filter === 1) return a;
  if (filter === 2) return b;
  if (filter === 3) return (a + b) >> 1;
  if (filter === 4) {
    const p = a + b - c;
    const [pa, pb, pc] = [Math.abs(p - a), Math.abs(p - b), Math.abs(p - c)];
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
  }
  return 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

const limits = { maxPixels: LIMIT_INPUT_PIXELS };
const fullPalette = Buffer.from(Array.from({ length: 256 }, (_, i) => [i, 255 - i, (i * 7) & 255]).flat());
const varied = (x: number, y: number, n: number) => Array.from({ length: n }, (_, c) => (x * 3 + y * 5 + c * 40) & 255);

/** The verdict that matters: decodable, its size, uniform or not; from checkImage with and without the PNG path. */
async function verdicts(body: Buffer, size = { width: 64, height: 48 }) {
  const fast = await checkImage(body, size, 'png');
  // keepPixels takes the full-decode path only.
  const full = await checkImage(body, size, 'png', true);
  const pick = (c: typeof fast) => ({
    ok: c.ok,
    blank: c.blank ?? null,
    width: c.width ?? null,
    height: c.height ?? null,
  });
  return { fast: pick(fast), full: pick(full) };
}

describe('PNG integrity without building pixels', () => {
  test('an intact PNG of every 8-bit colour type is proven, and so is a sharp-encoded one', async () => {
    const cases: [0 | 2 | 3 | 4 | 6, number][] = [
      [0, 1],
      [2, 3],
      [4, 2],
      [6, 4],
    ];
    for (const [colourType, n] of cases) {
      for (const filter of [0, 1]) {
        const png = encodePng({
          width: 64,
          height: 48,
          colourType,
          pixel: (x, y) => varied(x, y, n),
          filter: () => filter,
        });
        assert.deepEqual(
          await verifyPng(png, limits),
          { width: 64, height: 48, blank: false },
          `colour type ${colourType}, filter ${filter}`,
        );
      }
    }
    const palette = encodePng({
      width: 64,
      height: 48,
      colourType: 3,
      palette: fullPalette,
      pixel: (x, y) => [(x + y) & 255],
    });
    assert.deepEqual(await verifyPng(palette, limits), { width: 64, height: 48, blank: false });
    for (const format of ['png'] as const)
      assert.deepEqual(await verifyPng(await gradientImage(256, 256, format), limits), {
        width: 256,
        height: 256,
        blank: false,
      });
  });

  test('damage of any kind is not proven (the full decode then gives the verdict)', async () => {
    const good = encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3) });
    const idat = good.indexOf('IDAT') + 4;
    const flipped = Buffer.from(good);
    flipped[idat + 20]! ^= 0x40;
    const damaged: [string, Buffer][] = [
      ['cut in the IDAT', good.subarray(0, idat + 30)],
      ['cut before IEND', good.subarray(0, good.length - 12)],
      ['signature only', good.subarray(0, 8)],
      ['a flipped bit in the IDAT (CRC)', flipped],
      ['a flipped bit with the CRC made to match (zlib)', recrc(flipped, idat - 8)],
      [
        'a filter byte of 5',
        encodePng({
          width: 64,
          height: 48,
          colourType: 2,
          pixel: (x, y) => varied(x, y, 3),
          filter: (y) => (y === 30 ? 5 : 0),
        }),
      ],
      [
        'more rows than the header says',
        encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), heightInHeader: 40 }),
      ],
      [
        'fewer rows than the header says',
        encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), heightInHeader: 50 }),
      ],
      ['bytes after IEND', Buffer.concat([good, Buffer.from('trailer')])],
      [
        'an unknown chunk',
        encodePng({
          width: 64,
          height: 48,
          colourType: 2,
          pixel: (x, y) => varied(x, y, 3),
          extraChunks: [['vpAg', Buffer.alloc(9)]],
        }),
      ],
      [
        'interlaced',
        encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), interlace: 1 }),
      ],
      [
        'a palette shorter than 256 colours',
        encodePng({
          width: 64,
          height: 48,
          colourType: 3,
          palette: fullPalette.subarray(0, 30),
          pixel: (x, y) => [(x + y) % 10],
        }),
      ],
      ['too many pixels', good],
    ];
    for (const [what, body] of damaged) {
      assert.equal(await verifyPng(body, what === 'too many pixels' ? { maxPixels: 64 * 47 } : limits), null, what);
    }
  });

  test('blank means every pixel has one colour: a flat first row is not enough, and palette indices are compared by colour', async () => {
    const firstRowFlat = encodePng({
      width: 64,
      height: 48,
      colourType: 6,
      pixel: (x, y) => (y < 47 ? [9, 9, 9, 255] : varied(x, y, 4)),
      filter: (y) => y % 5,
    });
    assert.deepEqual(await verifyPng(firstRowFlat, limits), { width: 64, height: 48, blank: false });
    const flat = encodePng({ width: 64, height: 48, colourType: 2, pixel: () => [0, 90, 200], filter: (y) => y % 5 });
    assert.deepEqual(await verifyPng(flat, limits), { width: 64, height: 48, blank: true });
    // Indices 0 and 1 name the same colour.
    const twins = Buffer.from(fullPalette);
    twins.set([7, 7, 7, 7, 7, 7], 0);
    const sameColour = encodePng({
      width: 64,
      height: 48,
      colourType: 3,
      palette: twins,
      pixel: (x, y) => [(x + y) & 1],
    });
    assert.deepEqual(await verifyPng(sameColour, limits), { width: 64, height: 48, blank: true });
    // ... unless the transparency table tells them apart.
    const apart = encodePng({
      width: 64,
      height: 48,
      colourType: 3,
      palette: twins,
      trns: Buffer.from([255, 0]),
      pixel: (x, y) => [(x + y) & 1],
    });
    assert.deepEqual(await verifyPng(apart, limits), { width: 64, height: 48, blank: false });
    for (const body of [firstRowFlat, flat, sameColour, apart, await blankImage(64, 48)]) {
      const { fast, full } = await verdicts(body);
      assert.deepEqual(fast, full);
    }
  });

  test('what libpng reads differently is left to it: a short zlib window, an empty palette, a tRNS out of place or twice', async () => {
    const twins = Buffer.from(fullPalette);
    twins.set([7, 7, 7, 7, 7, 7], 0);
    const palettePixel = (x: number, y: number) => [(x + y) & 1];
    // A stream that reaches 1,000 bytes back while its header declares a 512-byte window.
    const noise = prng(3);
    const period = Array.from({ length: 1000 }, () => Math.floor(noise() * 256));
    const wide = encodePng({
      width: 64,
      height: 48,
      colourType: 2,
      pixel: (x, y) => [0, 1, 2].map((c) => period[((y * 64 + x) * 3 + c) % 1000]!),
    });
    const odd: [string, Buffer][] = [
      ['a 512-byte window', withZlibWindow(wide, 1)],
      [
        'an empty PLTE in an RGB image',
        encodePng({ width: 64, height: 48, colourType: 2, palette: Buffer.alloc(0), pixel: (x, y) => varied(x, y, 3) }),
      ],
      [
        'tRNS before PLTE',
        encodePng({
          width: 64,
          height: 48,
          colourType: 3,
          extraChunks: [],
          trns: Buffer.from([255, 0]),
          palette: twins,
          pixel: palettePixel,
          trnsFirst: true,
        }),
      ],
      [
        'tRNS twice',
        encodePng({
          width: 64,
          height: 48,
          colourType: 3,
          palette: twins,
          trns: Buffer.from([255, 255]),
          extraChunks: [['tRNS', Buffer.from([255, 0])]],
          pixel: palettePixel,
        }),
      ],
    ];
    for (const [what, body] of odd) {
      assert.equal(await verifyPng(body, limits), null, what);
      const { fast, full } = await verdicts(body);
      assert.deepEqual(fast, full, what);
    }
    // The same stream with its true window is proven.
    assert.deepEqual(await verifyPng(wide, limits), { width: 64, height: 48, blank: false });
  });

  test('rows are unfiltered exactly as the decoder does, for every filter and random bytes', async () => {
    const random = prng(42);
    for (let i = 0; i < 200; i++) {
      const colourType = ([0, 2, 4, 6] as const)[i % 4]!;
      const n = { 0: 1, 2: 3, 4: 2, 6: 4 }[colourType];
      const [width, height] = [1 + Math.floor(random() * 16), 1 + Math.floor(random() * 16)];
      // Random bytes under random filter bytes: every predictor, ties included, on every kind of neighbour.
      const png = encodePng({
        width,
        height,
        colourType,
        asIs: true,
        filter: () => Math.floor(random() * 5),
        pixel: () => Array.from({ length: n }, () => Math.floor(random() * 256)),
      });
      const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
      // sharp hands grey out as sRGB (three equal channels): take one of them, and the alpha.
      const pick = n === 1 ? [0] : n === 2 ? [0, info.channels - 1] : [...Array(n).keys()];
      const expected = Buffer.from(
        Array.from({ length: width * height }, (_, p) => pick.map((c) => data[p * info.channels + c]!)).flat(),
      );
      const stream = Buffer.concat(chunksOf(png, 'IDAT'));
      const rows: Buffer[] = [];
      unfilterRows(inflateSync(stream), width, height, n, (row) => rows.push(Buffer.from(row)) > 0);
      assert.deepEqual(Buffer.concat(rows), expected, `colour type ${colourType}, ${width}x${height}`);
    }
  });

  test('another size than expected is left to the full decode, before anything is inflated', async () => {
    const png = encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3) });
    assert.equal(await verifyPng(png, { ...limits, width: 256, height: 256 }), null);
    assert.equal(
      (await checkImage(png, { width: 256, height: 256 }, 'png')).reason,
      'image is 64x48, expected 256x256',
    );
  });

  test('checkImage gives the full decode verdict for intact, damaged, blank and odd PNGs alike (seeded mutations)', async () => {
    const random = prng(20261130);
    const bases = [
      encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), filter: (y) => y % 2 }),
      encodePng({ width: 64, height: 48, colourType: 3, palette: fullPalette, pixel: (x, y) => [(x * y) & 255] }),
      await sharp(await gradientImage(64, 48))
        .ensureAlpha()
        .png()
        .toBuffer(),
      await sharp(await gradientImage(64, 48))
        .png({ palette: true })
        .toBuffer(),
      await sharp(await gradientImage(64, 48))
        .png({ progressive: true })
        .toBuffer(),
      await sharp(await gradientImage(64, 48))
        .toColourspace('rgb16')
        .png()
        .toBuffer(),
      await blankImage(64, 48),
      await gradientImage(64, 64),
    ];
    let proven = 0;
    let compared = 0;
    for (const base of bases) {
      const samples: Buffer[] = [base];
      for (let i = 0; i < 40; i++) {
        const m = Buffer.from(base);
        const at = 8 + Math.floor(random() * (m.length - 8));
        if (i % 3 === 0) samples.push(m.subarray(0, at));
        else {
          m[at]! ^= 1 << Math.floor(random() * 8);
          samples.push(i % 3 === 1 ? m : recrcAll(m));
        }
      }
      for (const body of samples) {
        const { fast, full } = await verdicts(body);
        assert.deepEqual(fast, full);
        compared++;
        if (await verifyPng(body, limits)) proven++;
      }
    }
    // Valid images of every colour type and filter, from a four-value alphabet so uniform rows and blank
    // images are common: the unfiltering of the first row must agree with the decoder's.
    for (let i = 0; i < 120; i++) {
      const colourType = ([0, 2, 3, 4, 6] as const)[i % 5]!;
      const n = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 }[colourType];
      const width = 1 + Math.floor(random() * 6);
      const height = 1 + Math.floor(random() * 4);
      const flat = random() < 0.3;
      const body = encodePng({
        width,
        height,
        colourType,
        ...(colourType === 3 ? { palette: fullPalette } : {}),
        pixel: () => Array.from({ length: n }, () => (flat ? 1 : [0, 1, 2, 200][Math.floor(random() * 4)]!)),
        filter: () => Math.floor(random() * 5),
        asIs: random() < 0.3,
      });
      const { fast, full } = await verdicts(body, { width, height });
      assert.deepEqual(fast, full, `colour type ${colourType}, ${width}x${height}`);
      compared++;
      // Every one of these is a valid 8-bit image the fast path must decide itself.
      assert.ok(await verifyPng(body, limits), `colour type ${colourType}, ${width}x${height} not proven`);
      proven++;
    }
    // Besides those 120, the four unmutated bases of the fast path's kind (RGB, full palette, RGBA, blank).
    assert.ok(proven >= 124, `proven ${proven} of ${compared}`);
  });
});

/** The same PNG with its zlib header declaring a window of 2^(8 + cinfo) bytes (header check and CRC redone). */
function withZlibWindow(png: Buffer, cinfo: number): Buffer {
  const at = png.indexOf('IDAT') - 4;
  const out = Buffer.from(png);
  const cmf = (cinfo << 4) | 8;
  let flg = out[at + 9]! & 0xe0;
  flg += 31 - ((cmf * 256 + flg) % 31);
  out[at + 8] = cmf;
  out[at + 9] = flg;
  return recrc(out, at);
}

function chunksOf(png: Buffer, type: string): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 8; at + 12 <= png.length; at += 12 + png.readUInt32BE(at))
    if (png.toString('latin1', at + 4, at + 8) === type) out.push(png.subarray(at + 8, at + 8 + png.readUInt32BE(at)));
  return out;
}

/** Recomputes the CRC of the chunk starting at `at` (its length field). */
function recrc(png: Buffer, at: number): Buffer {
  const out = Buffer.from(png);
  const length = out.readUInt32BE(at);
  out.writeUInt32BE(crc32(out.subarray(at + 4, at + 8 + length)), at + 8 + length);
  return out;
}

/** Recomputes every chunk's CRC that can still be found (so a flipped bit reaches zlib or the header checks). */
function recrcAll(png: Buffer): Buffer {
  let out = png;
  for (let at = 8; at + 12 <= out.length;) {
    const length = out.readUInt32BE(at);
    if (at + 12 + length > out.length) break;
    out = recrc(out, at);
    at += 12 + length;
  }
  return out;
}
