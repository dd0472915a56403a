import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_ZOOM } from '../geo/mercator';
import { TileCache } from './tile-cache';
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

/** Now, to whole seconds, as HTTP dates have them. */
const wholeSecond = () => new Date(Math.floor(Date.now() / 1000) * 1000);

/** What the server counts and switches: its figures, the outage (on now, or scheduled) and the current drawing. */
class TileServerState {
  down = false;
  readonly stats: DemoTileServer['stats'] = {
    requests: 0,
    ok: 0,
    whileDown: 0,
    repeats: 0,
    notModified: 0,
    outages: [],
  };
  generation = 0;
  drawnAt = wholeSecond();
  readonly served = new Set<string>();
  readonly cache = new TileCache();
  outageAt: number | null;
  outageMs: number;

  constructor(readonly opts: DemoTileServerOptions) {
    this.outageAt = opts.outageAfterRequests ?? null;
    this.outageMs = opts.outageMs ?? 10_000;
  }

  setDown(d: boolean): void {
    if (d === this.down) return;
    this.down = d;
    if (d) this.stats.outages.push({ startedAt: Date.now(), endedAt: null });
    else this.stats.outages[this.stats.outages.length - 1]!.endedAt = Date.now();
  }

  /** Counts a tile request; the scheduled outage starts with the request past its count. */
  count(): void {
    this.stats.requests++;
    if (this.outageAt !== null && this.stats.requests > this.outageAt) {
      this.outageAt = null;
      this.setDown(true);
      setTimeout(() => this.setDown(false), this.outageMs).unref();
    }
  }

  redraw(): void {
    this.generation++;
    this.cache.clear();
    this.drawnAt = wholeSecond();
  }
}

type Tile = { z: number; x: number; y: number };

/** The tile a request's path names, or null for any address that is not a tile of the world. */
function tileOf(url: string): Tile | null {
  const m = /^\/(\d{1,2})\/(\d{1,10})\/(\d{1,10})\.png$/.exec(url);
  // Only the tiles of the world: each other address would be a cache entry of its own.
  if (!m || Number(m[1]) > MAX_ZOOM || Number(m[2]) >= 2 ** Number(m[1]) || Number(m[3]) >= 2 ** Number(m[1]))
    return null;
  return { z: Number(m[1]), x: Number(m[2]), y: Number(m[3]) };
}

function onRequest(state: TileServerState, req: IncomingMessage, res: ServerResponse): void {
  const tile = tileOf(req.url ?? '');
  if (!tile) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('no such tile\n');
    return;
  }
  state.count();
  const answer = () => answerTile(state, req, res, tile);
  if (state.opts.latencyMs) setTimeout(answer, state.opts.latencyMs);
  else answer();
}

/** The tile (from the cache, rendered once per drawing), a 304 for its current ETag, or the outage's answer. */
function answerTile(state: TileServerState, req: IncomingMessage, res: ServerResponse, tile: Tile): void {
  const { opts, stats } = state;
  if (state.down) {
    stats.whileDown++;
    res.writeHead(opts.outageStatus ?? 503, { 'content-type': 'text/plain' }).end('renderer overloaded\n');
    return;
  }
  const { z, x, y } = tile;
  const drawing = state.generation;
  const etag = `"${z}-${x}-${y}-g${drawing}"`;
  if (opts.validators && req.headers['if-none-match'] === etag) {
    stats.notModified++;
    res.writeHead(304, { etag, 'cache-control': 'max-age=3600' }).end();
    return;
  }
  const send = (png: Buffer) => {
    const validators = opts.validators ? { etag, 'last-modified': state.drawnAt.toUTCString() } : {};
    // Served once the whole answer has gone out: a request whose connection was closed under it (the
    // server restarted while it rendered) was not served, and asking again is no duplicate.
    res.once('finish', () => {
      stats.ok++;
      if (state.served.has(req.url!)) stats.repeats++;
      else state.served.add(req.url!);
      opts.onServed?.(req.url!);
    });
    res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'max-age=3600', ...validators }).end(png);
  };
  const fail = (err: unknown) => {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(`render failed: ${(err as Error).message}\n`);
  };
  state.cache.get(`${drawing}/${z}/${x}/${y}`, () => renderTile(z, x, y, drawing)).then(send, fail);
}

/**
 * The demo tile server: XYZ PNG tiles on 127.0.0.1 of a real map (Natural Earth land, coasts and country
 * borders in Web Mercator, world-tiles.ts, with a faint z/x/y label), so a stitched mosaic is a correct map
 * and a tile out of place shows, with an outage that can be switched on by hand or scheduled to start after
 * a number of requests. It counts what it receives, and what it received while it was down: the figure a
 * breaker exists to keep small.
 */
export async function startDemoTileServer(opts: DemoTileServerOptions = {}): Promise<DemoTileServer> {
  // Loads the map data before the first request, and gives tileBytes.
  const typical = await renderTile(TYPICAL_TILE.z, TYPICAL_TILE.x, TYPICAL_TILE.y);
  const state = new TileServerState(opts);
  const server: Server = createServer((req, res) => onRequest(state, req, res));
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    template: `${url}/{z}/{x}/{y}.png`,
    stats: state.stats,
    tileBytes: typical.length,
    setDown: (d) => state.setDown(d),
    scheduleOutage: (after, forMs) => {
      state.outageAt = state.stats.requests + after;
      state.outageMs = forMs;
    },
    isDown: () => state.down,
    redraw: () => state.redraw(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
