import sharp from 'sharp';
import { verifyPng } from './png-integrity';

export interface ImageCheck {
  ok: boolean;
  reason: string;
  width?: number;
  height?: number;
  format?: string;
  /** Every pixel is the same: a uniform tile. */
  blank?: boolean;
  /** The decoded pixels, when asked for (a metatile is cut from them instead of being decoded again). */
  pixels?: DecodedPixels;
}

export interface DecodedPixels {
  data: Buffer;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

/** The largest image we decode (a 4096 x 4096 metatile with room to spare): guards against decompression bombs. */
export const LIMIT_INPUT_PIXELS = 8192 * 8192;

/**
 * Decodes every pixel (failOn 'truncated': a header-only check such as metadata() accepts a truncated JPEG),
 * checks the size and whether the image is uniform. `format` is the sniffed one, for the reason text.
 * Uniformity is checked on the raw pixels, stopping at the first that differs (at once for a real tile):
 * sharp's stats() would also compute entropy and sharpness and costs ten times the decode.
 * A PNG wanted without its pixels is first verified without the decoder's pixel pipeline (png-integrity.ts);
 * only what that cannot prove intact is decoded here.
 */
export async function checkImage(
  body: Buffer,
  expected: { width: number; height: number } | null,
  format = 'image',
  keepPixels = false,
): Promise<ImageCheck> {
  if (format === 'png' && !keepPixels) {
    // A PNG proven intact byte for byte needs no pixel pipeline; anything else gets the full decode below.
    const png = await verifyPng(body, {
      maxPixels: LIMIT_INPUT_PIXELS,
      width: expected?.width ?? null,
      height: expected?.height ?? null,
    });
    if (png)
      return {
        ok: true,
        reason: `${format} ${png.width}x${png.height}`,
        width: png.width,
        height: png.height,
        format,
        blank: png.blank,
      };
  }
  let data: Buffer;
  let info: sharp.OutputInfo;
  try {
    ({ data, info } = await sharp(body, { failOn: 'truncated', limitInputPixels: LIMIT_INPUT_PIXELS })
      .raw()
      .toBuffer({ resolveWithObject: true }));
  } catch (err) {
    return {
      ok: false,
      reason: `undecodable image: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`,
    };
  }
  const { width, height } = info;
  if (expected && (width !== expected.width || height !== expected.height)) {
    return {
      ok: false,
      reason: `image is ${width}x${height}, expected ${expected.width}x${expected.height}`,
      width,
      height,
      format,
    };
  }
  const pixels = keepPixels ? { pixels: { data, width, height, channels: info.channels } } : {};
  return {
    ok: true,
    reason: `${format} ${width}x${height}`,
    width,
    height,
    format,
    blank: uniform(data, info.channels),
    ...pixels,
  };
}

function uniform(pixels: Buffer, channels: number): boolean {
  for (let i = channels; i < pixels.length; i += channels) {
    for (let c = 0; c < channels; c++) if (pixels[i + c] !== pixels[c]) return false;
  }
  return true;
}
