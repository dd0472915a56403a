import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { checkImage, LIMIT_INPUT_PIXELS } from '../../src/activities/validate/image-check';
import { verifyPng } from '../../src/activities/validate/png-integrity';
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
}): Buffer {
  const rows: Buffer[] = [];
  for (let y = 0; y < o.height; y++) {
    const raw = Buffer.from(Array.from({ length: o.width }, (_, x) => o.pixel(x, y)).flat());
    const filter = o.filter?.(y) ?? 0;
    // Filter 1 (Sub) on the encoder side; other filter bytes are written with the raw row (a corrupt file).
    const row = filter === 1 ? Buffer.from(raw.map((v, i) => (v - (i >= raw.length / o.width ? raw[i - raw.length / o.width]! : 0)) & 0xff)) : raw;
    rows.push(Buffer.concat([Buffer.from([filter]), row]));
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(o.width, 0);
  ihdr.writeUInt32BE(o.heightInHeader ?? o.height, 4);
  ihdr.set([8, o.colourType, 0, 0, o.interlace ?? 0], 8);
  const chunks: [string, Buffer][] = [['IHDR', ihdr]];
  if (o.palette) chunks.push(['PLTE', o.palette]);
  if (o.trns) chunks.push(['tRNS', o.trns]);
  chunks.push(...(o.extraChunks ?? []));
  const z = deflateSync(Buffer.concat(rows));
  // Split like libpng does, so several IDATs are the normal case.
  for (let i = 0; i < z.length; i += 8192) chunks.push(['IDAT', z.subarray(i, i + 8192)]);
  chunks.push(['IEND', Buffer.alloc(0)]);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), ...chunks.map(([t, d]) => chunk(t, d))]);
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

const fullPalette = Buffer.from(Array.from({ length: 256 }, (_, i) => [i, 255 - i, (i * 7) & 255]).flat());
const varied = (x: number, y: number, n: number) => Array.from({ length: n }, (_, c) => (x * 3 + y * 5 + c * 40) & 255);

/** The verdict that matters: decodable, its size, uniform or not; from checkImage with and without the PNG path. */
async function verdicts(body: Buffer, size = { width: 64, height: 48 }) {
  const fast = await checkImage(body, size, 'png');
  // keepPixels takes the full-decode path only.
  const full = await checkImage(body, size, 'png', true);
  const pick = (c: typeof fast) => ({ ok: c.ok, blank: c.blank ?? null, width: c.width ?? null, height: c.height ?? null });
  return { fast: pick(fast), full: pick(full) };
}

describe('PNG integrity without building pixels', () => {
  test('an intact PNG of every 8-bit colour type is proven, and so is a sharp-encoded one', async () => {
    const cases: [0 | 2 | 3 | 4 | 6, number][] = [[0, 1], [2, 3], [4, 2], [6, 4]];
    for (const [colourType, n] of cases) {
      for (const filter of [0, 1]) {
        const png = encodePng({ width: 64, height: 48, colourType, pixel: (x, y) => varied(x, y, n), filter: () => filter });
        assert.deepEqual(await verifyPng(png, LIMIT_INPUT_PIXELS), { width: 64, height: 48 }, `colour type ${colourType}, filter ${filter}`);
      }
    }
    const palette = encodePng({ width: 64, height: 48, colourType: 3, palette: fullPalette, pixel: (x, y) => [(x + y) & 255] });
    assert.deepEqual(await verifyPng(palette, LIMIT_INPUT_PIXELS), { width: 64, height: 48 });
    for (const format of ['png'] as const) assert.deepEqual(await verifyPng(await gradientImage(256, 256, format), LIMIT_INPUT_PIXELS), { width: 256, height: 256 });
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
      ['a filter byte of 5', encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), filter: (y) => (y === 30 ? 5 : 0) })],
      ['more rows than the header says', encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), heightInHeader: 40 })],
      ['fewer rows than the header says', encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), heightInHeader: 50 })],
      ['bytes after IEND', Buffer.concat([good, Buffer.from('trailer')])],
      ['an unknown chunk', encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), extraChunks: [['vpAg', Buffer.alloc(9)]] })],
      ['interlaced', encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), interlace: 1 })],
      ['a palette shorter than 256 colours', encodePng({ width: 64, height: 48, colourType: 3, palette: fullPalette.subarray(0, 30), pixel: (x, y) => [(x + y) % 10] })],
      ['too many pixels', good],
    ];
    for (const [what, body] of damaged) {
      assert.equal(await verifyPng(body, what === 'too many pixels' ? 64 * 47 : LIMIT_INPUT_PIXELS), null, what);
    }
  });

  test('a first row of one colour is not proven (it may be a blank tile), even when its palette indices differ', async () => {
    const firstRowFlat = encodePng({ width: 64, height: 48, colourType: 6, pixel: (x, y) => (y === 0 ? [9, 9, 9, 255] : varied(x, y, 4)), filter: () => 1 });
    assert.equal(await verifyPng(firstRowFlat, LIMIT_INPUT_PIXELS), null);
    // Indices 0 and 1 name the same colour.
    const twins = Buffer.from(fullPalette);
    twins.set([7, 7, 7, 7, 7, 7], 0);
    const sameColour = encodePng({ width: 64, height: 48, colourType: 3, palette: twins, pixel: (x) => [x & 1] });
    assert.equal(await verifyPng(sameColour, LIMIT_INPUT_PIXELS), null);
    // ... unless the transparency table tells them apart.
    const apart = encodePng({ width: 64, height: 48, colourType: 3, palette: twins, trns: Buffer.from([255, 0]), pixel: (x) => [x & 1] });
    assert.deepEqual(await verifyPng(apart, LIMIT_INPUT_PIXELS), { width: 64, height: 48 });
    assert.equal((await checkImage(sameColour, { width: 64, height: 48 }, 'png')).blank, true);
    assert.equal((await checkImage(await blankImage(64, 48), { width: 64, height: 48 }, 'png')).blank, true);
  });

  test('checkImage gives the full decode verdict for intact, damaged, blank and odd PNGs alike (seeded mutations)', async () => {
    const random = prng(20261130);
    const bases = [
      encodePng({ width: 64, height: 48, colourType: 2, pixel: (x, y) => varied(x, y, 3), filter: (y) => y % 2 }),
      encodePng({ width: 64, height: 48, colourType: 3, palette: fullPalette, pixel: (x, y) => [(x * y) & 255] }),
      await sharp(await gradientImage(64, 48)).ensureAlpha().png().toBuffer(),
      await sharp(await gradientImage(64, 48)).png({ palette: true }).toBuffer(),
      await sharp(await gradientImage(64, 48)).png({ progressive: true }).toBuffer(),
      await sharp(await gradientImage(64, 48)).toColourspace('rgb16').png().toBuffer(),
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
        if (await verifyPng(body, LIMIT_INPUT_PIXELS)) proven++;
      }
    }
    // Valid images of every colour type and filter, from a two-value alphabet so uniform rows and blank
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
        pixel: () => Array.from({ length: n }, () => (flat ? 1 : random() < 0.5 ? 0 : 1)),
        filter: () => Math.floor(random() * 5),
      });
      const { fast, full } = await verdicts(body, { width, height });
      assert.deepEqual(fast, full, `colour type ${colourType}, ${width}x${height}`);
      compared++;
      if (await verifyPng(body, LIMIT_INPUT_PIXELS)) proven++;
    }
    // The fast path was taken often enough for the comparison to mean something.
    assert.ok(proven >= 40, `proven ${proven} of ${compared}`);
  });
});

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
  for (let at = 8; at + 12 <= out.length; ) {
    const length = out.readUInt32BE(at);
    if (at + 12 + length > out.length) break;
    out = recrc(out, at);
    at += 12 + length;
  }
  return out;
}
