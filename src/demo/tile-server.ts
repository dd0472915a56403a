import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_ZOOM } from '../geo/mercator';
import { renderTile } from './world-tiles';

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
  stats: {
    requests: number;
    ok: number;
    whileDown: number;
    repeats: number;
    notModified: number;
    outages: { startedAt: number; endedAt: number | null }[];
  };
  /**
   * Size of a typical tile with detail, in bytes: the middle of the demo's mosaic of the Alps at zoom 10 (a few
   * KB; tiles of open sea or of land with no coast or border are about 2 KB, a whole continent at zoom 0-3 up to 30 KB).
   */
  tileBytes: number;
  setDown(down: boolean): void;
  /** Go down after `afterRequests` more requests, for `forMs`. */
  scheduleOutage(afterRequests: number, forMs: number): void;
  isDown(): boolean;
  /** Draws every tile anew (each gets another image, and another ETag): the data behind the map changed. */
  redraw(): void;
  close(): Promise<void>;
}

/** The tile whose size is `tileBytes`: the middle of the demo's mosaic of the Alps (zoom 10), borders and all. */
const TYPICAL_TILE = { z: 10, x: 540, y: 361 };

/** Rendered tiles kept, at most this many bytes (the benches fetch the same thousands of tiles round after round). */
const CACHE_BYTES = 256 * 1024 * 1024;

/**
 * Each tile is rendered once per drawing and kept, least recently served dropped first. A tile asked for
 * again while it renders shares that render.
 */
class TileCache {
  private readonly tiles = new Map<string, Promise<Buffer>>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;

  /** After a redraw no request names the old drawing's tiles again. */
  clear(): void {
    this.tiles.clear();
    this.sizes.clear();
    this.bytes = 0;
  }

  get(key: string, render: () => Promise<Buffer>): Promise<Buffer> {
    const hit = this.tiles.get(key);
    if (hit) {
      // Most recently used last, in the Map's order.
      this.tiles.delete(key);
      this.tiles.set(key, hit);
      return hit;
    }
    const p = render();
    this.tiles.set(key, p);
    p.then(
      (png) => {
        if (this.tiles.get(key) !== p) return;
        this.sizes.set(key, png.length);
        this.bytes += png.length;
        this.evict();
      },
      () => this.tiles.delete(key),
    );
    return p;
  }

  private evict(): void {
    for (const key of this.tiles.keys()) {
      if (this.bytes <= CACHE_BYTES) return;
      const size = this.sizes.get(key);
      if (size === undefined) continue; // still rendering
      this.tiles.delete(key);
      this.sizes.delete(key);
      this.bytes -= size;
    }
  }
}

/**
 * The demo tile server: XYZ PNG tiles on 127.0.0.1 of a real map (Natural Earth land, coasts and country
 * borders in Web Mercator, world-tiles.ts, with a faint z/x/y label), so a stitched mosaic is a correct map
 * and a tile out of place shows, with an outage that can be switched on by hand or scheduled to start after
 * a number of requests. It counts what it receives, and what it received while it was down: the figure a
 * breaker exists to keep small.
 */
export async function startDemoTileServer(opts: DemoTileServerOptions = {}): Promise<DemoTileServer> {
  const cache = new TileCache();
  // Loads the map data before the first request, and gives tileBytes.
  const typical = await renderTile(TYPICAL_TILE.z, TYPICAL_TILE.x, TYPICAL_TILE.y);
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
    const m = /^\/(\d{1,2})\/(\d{1,10})\/(\d{1,10})\.png$/.exec(req.url ?? '');
    // Only the tiles of the world: each other address would be a cache entry of its own.
    if (!m || Number(m[1]) > MAX_ZOOM || Number(m[2]) >= 2 ** Number(m[1]) || Number(m[3]) >= 2 ** Number(m[1])) {
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
      const [z, x, y] = [Number(m[1]), Number(m[2]), Number(m[3])];
      const drawing = generation;
      const etag = `"${z}-${x}-${y}-g${drawing}"`;
      if (opts.validators && req.headers['if-none-match'] === etag) {
        stats.notModified++;
        res.writeHead(304, { etag, 'cache-control': 'max-age=3600' }).end();
        return;
      }
      const send = (png: Buffer) => {
        const validators = opts.validators ? { etag, 'last-modified': drawnAt.toUTCString() } : {};
        // Served once the whole answer has gone out: a request whose connection was closed under it (the
        // server restarted while it rendered) was not served, and asking again is no duplicate.
        res.once('finish', () => {
          stats.ok++;
          if (served.has(req.url!)) stats.repeats++;
          else served.add(req.url!);
          opts.onServed?.(req.url!);
        });
        res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'max-age=3600', ...validators }).end(png);
      };
      const fail = (err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`render failed: ${(err as Error).message}\n`);
      };
      cache.get(`${drawing}/${z}/${x}/${y}`, () => renderTile(z, x, y, drawing)).then(send, fail);
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
    tileBytes: typical.length,
    setDown,
    scheduleOutage: (after, forMs) => {
      outageAt = stats.requests + after;
      outageMs = forMs;
    },
    isDown: () => down,
    redraw: () => {
      generation++;
      cache.clear();
      drawnAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
