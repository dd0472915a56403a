import sharp from 'sharp';

/** A non-uniform RGB test image (a gradient with a seed), encoded as `format`. */
export async function gradientImage(
  width: number,
  height: number,
  format: 'png' | 'jpeg' | 'webp' = 'png',
  seed = 0,
): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      raw[i] = (x + seed) & 255;
      raw[i + 1] = (y * 2 + seed) & 255;
      raw[i + 2] = (x ^ y) & 255;
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .toFormat(format)
    .toBuffer();
}

/** A uniform image: what WMS EXCEPTIONS=BLANK, or open sea, looks like. */
export async function blankImage(
  width: number,
  height: number,
  rgba: { r: number; g: number; b: number; alpha: number } = { r: 255, g: 255, b: 255, alpha: 0 },
): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 4, background: rgba } })
    .png()
    .toBuffer();
}
