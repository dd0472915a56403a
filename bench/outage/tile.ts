import sharp from 'sharp';

/** A small valid 256x256 PNG tile (a flat sea-blue square), generated once per server. */
export async function makeTilePng(): Promise<Buffer> {
  return sharp({ create: { width: 256, height: 256, channels: 3, background: { r: 170, g: 211, b: 223 } } })
    .png()
    .toBuffer();
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Does the body start like a PNG? (The workers' cheap check that a 200 carried an image.) */
export function looksLikePng(body: Buffer): boolean {
  return body.length > PNG_SIGNATURE.length && body.subarray(0, PNG_SIGNATURE.length).equals(PNG_SIGNATURE);
}
