/** The coverage mask beside a mosaic: one georeferenced greyscale pixel per tile, saying what became of it. */
import { randomBytes } from 'node:crypto';
import { rename, unlink } from 'node:fs/promises';
import sharp from 'sharp';
import { writeSidecars, type Bounds3857 } from './georef';

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
