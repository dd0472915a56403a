/** Pixel comparison of two tiles after decoding (sharp, to 8-bit RGBA): the largest channel difference. */
import { readFile } from 'node:fs/promises';
import sharp from 'sharp';

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export interface Decoded {
  png: boolean;
  /** e.g. "256x256 rgb 8-bit" or "256x256 palette 8-bit" as stored. */
  kind: string;
  width: number;
  height: number;
  rgba: Buffer;
}

export async function decode(file: string): Promise<Decoded> {
  const bytes = await readFile(file);
  const meta = await sharp(bytes).metadata();
  const { data, info } = await sharp(bytes).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const kind = `${meta.width}x${meta.height} ${meta.isPalette ? 'palette' : meta.space}${meta.hasAlpha ? '+alpha' : ''} ${meta.bitsPerSample ?? 8}-bit`;
  return { png: bytes.subarray(0, 8).equals(PNG_MAGIC), kind, width: info.width, height: info.height, rgba: data };
}

export interface PixelDiff {
  /** Largest |a - b| over all channels (RGBA) of all pixels; 255 when the sizes differ. */
  maxAbs: number;
  /** Pixels with any channel different. */
  differing: number;
  pixels: number;
}

export function diff(a: Decoded, b: Decoded): PixelDiff {
  if (a.width !== b.width || a.height !== b.height)
    return { maxAbs: 255, differing: Math.max(a.width * a.height, b.width * b.height), pixels: a.width * a.height };
  let maxAbs = 0;
  let differing = 0;
  for (let i = 0; i < a.rgba.length; i += 4) {
    let px = 0;
    for (let c = 0; c < 4; c++) {
      const d = Math.abs(a.rgba[i + c]! - b.rgba[i + c]!);
      if (d > px) px = d;
    }
    if (px) differing++;
    if (px > maxAbs) maxAbs = px;
  }
  return { maxAbs, differing, pixels: a.width * a.height };
}
