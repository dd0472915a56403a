import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';

export interface DemoTileServerOptions {
  /** Added before every answer (ms): a render or a CDN miss. */
  latencyMs?: number;
  /** Go down after this many tile requests, for `outageMs`. */
  outageAfterRequests?: number;
  outageMs?: number;
  /** While down: answer this status (default 503), or refuse to render with a WMS-style XML exception (`'xml'`). */
  outageStatus?: number;
  /** Called as each good tile goes out, with its path (tests count who fetched what, and when). */
  onServed?: (path: string) => void;
  /** Listen on this port (a restart on the same address); default any free one. */
  port?: number;
  /**
   * Send ETag and Last-Modified, and answer 304 to a request whose If-None-Match names the tile's current
   * ETag, as a tile server behind a CDN does. Off by default: a validator makes the tile store write a
   * sidecar per tile, which the benches would measure.
   */
  validators?: boolean;
}

export interface DemoTileServer {
  url: string;
  /** The XYZ template for a source: `<url>/{z}/{x}/{y}.png`. */
  template: string;
  /** `repeats`: requests for a tile already served once; `notModified`: 304s (with `validators`). */
  stats: { requests: number; ok: number; whileDown: number; repeats: number; notModified: number; outages: { startedAt: number; endedAt: number | null }[] };
  /** Size of one of its tiles, in bytes (they are 10-30 KB, like real basemap PNGs). */
  tileBytes: number;
  setDown(down: boolean): void;
  /** Go down after `afterRequests` more requests, for `forMs`. */
  scheduleOutage(afterRequests: number, forMs: number): void;
  isDown(): boolean;
  /** Draws every tile anew (each gets another image, and another ETag): the data behind the map changed. */
  redraw(): void;
  close(): Promise<void>;
}

const VARIANTS = 8;

async function renderVariant(seed: number): Promise<Buffer> {
  const roads = Array.from({ length: 6 }, (_, i) => {
    const a = (seed * 37 + i * 53) % 256;
    const b = (seed * 91 + i * 29) % 256;
    return `<path d="M0 ${a} C 80 ${b}, 170 ${255 - b}, 256 ${(a + b) % 256}" stroke="${i % 3 ? '#ffffff' : '#f7c66b'}" stroke-width="${2 + (i % 4)}" fill="none"/>`;
  }).join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">
    <rect width="256" height="256" fill="#eae6dd"/>
    <polygon points="0,${150 + seed * 7} 90,${120 + seed * 3} 256,${170 - seed * 5} 256,256 0,256" fill="#aad3df"/>
    <rect x="${20 + seed * 17}" y="30" width="60" height="40" fill="#c8e6b4"/>
    ${roads}
    <rect x="0.5" y="0.5" width="255" height="255" fill="none" stroke="#bbb"/>
  </svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/**
 * The demo tile server: XYZ PNG tiles on 127.0.0.1 that look like a basemap (land, water, roads, a label
 * with the tile's address, so the stitched mosaic shows where every tile went), with an outage that can be
 * switched on by hand or scheduled to start after a number of requests. It counts what it receives, and what
 * it received while it was down: the figure a breaker exists to keep small.
 */
export async function startDemoTileServer(opts: DemoTileServerOptions = {}): Promise<DemoTileServer> {
  const variants = await Promise.all(Array.from({ length: VARIANTS }, (_, s) => renderVariant(s)));
  let down = false;
  const stats: DemoTileServer['stats'] = { requests: 0, ok: 0, whileDown: 0, repeats: 0, notModified: 0, outages: [] };
  let generation = 0;
  // Whole seconds, as HTTP dates have them.
  let drawnAt = new Date(Math.floor(Date.now() / 1000) * 1000);
  const served = new Set<string>();
  const setDown = (d: boolean) => {
    if (d === down) return;
    down = d;
    if (d) stats.outages.push({ startedAt: Date.now(), endedAt: null });
    else stats.outages[stats.outages.length - 1]!.endedAt = Date.now();
  };
  let outageAt = opts.outageAfterRequests ?? null;
  let outageMs = opts.outageMs ?? 10_000;
  const server: Server = createServer((req, res) => {
    const m = /^\/(\d+)\/(\d+)\/(\d+)\.png$/.exec(req.url ?? '');
    if (!m) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such tile\n');
      return;
    }
    stats.requests++;
    if (outageAt !== null && stats.requests > outageAt) {
      outageAt = null;
      setDown(true);
      setTimeout(() => setDown(false), outageMs).unref();
    }
    const answer = () => {
      if (down) {
        stats.whileDown++;
        res.writeHead(opts.outageStatus ?? 503, { 'content-type': 'text/plain' }).end('renderer overloaded\n');
        return;
      }
      const [x, y] = [Number(m[2]), Number(m[3])];
      const variant = (x * 3 + y * 5 + generation) % VARIANTS;
      const etag = `"v${variant}-g${generation}"`;
      if (opts.validators && req.headers['if-none-match'] === etag) {
        stats.notModified++;
        res.writeHead(304, { etag, 'cache-control': 'max-age=3600' }).end();
        return;
      }
      stats.ok++;
      if (served.has(req.url!)) stats.repeats++;
      else served.add(req.url!);
      opts.onServed?.(req.url!);
      const validators = opts.validators ? { etag, 'last-modified': drawnAt.toUTCString() } : {};
      res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'max-age=3600', ...validators }).end(variants[variant]);
    };
    if (opts.latencyMs) setTimeout(answer, opts.latencyMs);
    else answer();
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    template: `${url}/{z}/{x}/{y}.png`,
    stats,
    tileBytes: variants[0]!.length,
    setDown,
    scheduleOutage: (after, forMs) => {
      outageAt = stats.requests + after;
      outageMs = forMs;
    },
    isDown: () => down,
    redraw: () => {
      generation++;
      drawnAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
