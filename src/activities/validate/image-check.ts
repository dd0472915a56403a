import sharp from 'sharp';

export interface ImageCheck {
  ok: boolean;
  reason: string;
  width?: number;
  height?: number;
  format?: string;
  /** Every channel holds one value: a uniform tile. */
  blank?: boolean;
}

/** The largest image we decode (a 4096 x 4096 metatile with room to spare): guards against decompression bombs. */
export const LIMIT_INPUT_PIXELS = 8192 * 8192;

/**
 * Decodes the whole image (failOn 'truncated': a header-only check accepts a truncated JPEG), checks its size
 * and whether it is uniform. `expected` null skips the size check.
 */
export async function checkImage(body: Buffer, expected: { width: number; height: number } | null): Promise<ImageCheck> {
  try {
    const image = sharp(body, { failOn: 'truncated', limitInputPixels: LIMIT_INPUT_PIXELS });
    const meta = await image.metadata();
    if (expected && (meta.width !== expected.width || meta.height !== expected.height)) {
      return { ok: false, reason: `image is ${meta.width}x${meta.height}, expected ${expected.width}x${expected.height}`, width: meta.width, height: meta.height, format: meta.format };
    }
    // stats() decodes every pixel, which is what catches truncation; min === max on every channel is uniform.
    const stats = await image.stats();
    const blank = stats.channels.every((c) => c.min === c.max);
    return { ok: true, reason: `${meta.format} ${meta.width}x${meta.height}`, width: meta.width, height: meta.height, format: meta.format, blank };
  } catch (err) {
    return { ok: false, reason: `undecodable image: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` };
  }
}
