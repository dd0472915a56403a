/** What a body is, by its first bytes (never trusting Content-Type alone). */
export type BodyKind = 'png' | 'jpeg' | 'webp' | 'gif' | 'tiff' | 'xml' | 'html' | 'json' | 'empty' | 'unknown';

export function sniff(body: Buffer): BodyKind {
  if (body.length === 0) return 'empty';
  if (body.length >= 8 && body.readUInt32BE(0) === 0x89504e47 && body.readUInt32BE(4) === 0x0d0a1a0a) return 'png';
  if (body.length >= 3 && body[0] === 0xff && body[1] === 0xd8 && body[2] === 0xff) return 'jpeg';
  if (body.length >= 12 && body.toString('latin1', 0, 4) === 'RIFF' && body.toString('latin1', 8, 12) === 'WEBP')
    return 'webp';
  if (body.length >= 6 && /^GIF8[79]a$/.test(body.toString('latin1', 0, 6))) return 'gif';
  if (body.length >= 4 && (body.toString('latin1', 0, 4) === 'II*\0' || body.toString('latin1', 0, 4) === 'MM\0*'))
    return 'tiff';
  const head = body
    .toString('utf8', 0, Math.min(body.length, 512))
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  if (head.startsWith('<!doctype html') || head.startsWith('<html') || /^<\?xml[^>]*>\s*<!doctype html/.test(head))
    return 'html';
  if (head.startsWith('<')) return 'xml';
  if (head.startsWith('{') || head.startsWith('[')) return 'json';
  return 'unknown';
}

export function isImageKind(kind: BodyKind): boolean {
  return kind === 'png' || kind === 'jpeg' || kind === 'webp' || kind === 'gif' || kind === 'tiff';
}
