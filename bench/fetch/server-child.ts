/**
 * The tile server of bench:fetch, in its own process so it does not share the measured event loop: serves
 * one of 16 distinct map-like 256 px PNG tiles for any /{z}/{x}/{y}.png on 127.0.0.1, and
 * prints its port on stdout.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';

async function main(): Promise<void> {
  // Map-like tiles (land, water, roads, a label), 16 distinct ones: sizes like real basemap PNGs (10-30 KB),
  // not the incompressible noise a random gradient would be.
  const tiles = await Promise.all(
    Array.from({ length: 16 }, (_, seed) => {
      const roads = Array.from({ length: 12 }, (_, i) => {
        const a = (seed * 37 + i * 53) % 256;
        const b = (seed * 91 + i * 29) % 256;
        return `<path d="M0 ${a} C 80 ${b}, 170 ${255 - b}, 256 ${(a + b) % 256}" stroke="${i % 3 ? '#ffffff' : '#f7c66b'}" stroke-width="${2 + (i % 4)}" fill="none"/>`;
      }).join('');
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">
        <rect width="256" height="256" fill="#eae6dd"/>
        <polygon points="0,${150 + seed * 3} 90,${120 + seed} 256,${170 - seed * 2} 256,256 0,256" fill="#aad3df"/>
        <rect x="${20 + seed * 5}" y="30" width="60" height="40" fill="#c8e6b4"/>
        ${roads}
        <text x="${30 + seed}" y="110" font-family="sans-serif" font-size="14" fill="#333">Street ${seed}</text>
      </svg>`;
      return sharp(Buffer.from(svg)).png().toBuffer();
    }),
  );
  // Optional render time per tile (argv[2], ms), like a real tile server or CDN miss; 0: answer at once.
  const latencyMs = Number(process.argv[2] ?? 0);
  const server = createServer((req, res) => {
    const n = Number((req.url ?? '').split('/')[2] ?? 0);
    const send = () => res.writeHead(200, { 'content-type': 'image/png' }).end(tiles[n % tiles.length]);
    if (latencyMs > 0) setTimeout(send, latencyMs);
    else send();
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${(server.address() as AddressInfo).port} ${tiles[0]!.length}\n`);
  });
  process.on('disconnect', () => process.exit(0));
}

void main();
