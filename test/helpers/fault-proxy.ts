import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import sharp from 'sharp';

/**
 * A fault-injecting HTTP proxy on 127.0.0.1 in front of a real server (the MapServer fixture), whose mode
 * switches at run time, so a fault can start in the middle of a mosaic and end again:
 *   pass               forward every request
 *   hang               accept and never answer; leaving hang drops the held connections, as a stalled proxy
 *                      or renderer does when it comes back (the "recovery burst")
 *   slow               forward each request after `slowMs`
 *   service-exception  200 with a WMS ServiceException that does not blame the request (a drawing error)
 *   503                503 with Retry-After (`retryAfterS`)
 *   refused            stop listening and drop every connection: connections are refused until another mode
 *   reset              destroy the socket before answering
 *   blank              200 with a uniform PNG of the requested WIDTH x HEIGHT
 *   error-image        200 with an error text drawn into a PNG of the requested size: a client cannot tell it
 *                      from a tile (MapServer's EXCEPTIONS=INIMAGE does this); documented as undetectable
 * Every request received is logged with its time and the mode that answered it (a refused connection is
 * never received, so never logged).
 */
export type FaultMode =
  'pass' | 'hang' | 'slow' | 'service-exception' | '503' | 'refused' | 'reset' | 'blank' | 'error-image';

export interface FaultOptions {
  /** slow: the delay before each answer. Default 4 000 ms. */
  slowMs?: number;
  /** 503: the Retry-After header, in seconds. Default 1. */
  retryAfterS?: number;
}

export interface FaultPlan extends FaultOptions {
  mode: FaultMode;
  /** The fault starts with the request after this many more (0: with the next). */
  afterRequests: number;
  /** The fault ends (back to pass) this long after it started; absent: it lasts until told otherwise. */
  forMs?: number;
}

export interface ReceivedRequest {
  at: number;
  /** An entity's self-probe (user agent `tilebreaker-probe`), not a tile a run asked for. */
  selfProbe?: true;
  mode: FaultMode;
  /** pass: how long the upstream took to answer in full (ms), once it has. */
  upstreamMs?: number;
}

export interface FaultProxy {
  /** The upstream URL's path and query on the proxy's port. */
  url: string;
  port: number;
  readonly mode: FaultMode;
  readonly log: readonly ReceivedRequest[];
  /** When the last fault started and ended (Date.now()), null until then. */
  readonly faultStartedAt: number | null;
  readonly recoveredAt: number | null;
  /** Hung requests held open now. */
  readonly held: number;
  /** Held connections dropped when the last hang ended (the size of the recovery burst). */
  readonly dropped: number;
  /** Switches mode now (leaving hang drops the held connections; refused closes the listener). */
  set(mode: FaultMode, opts?: FaultOptions): Promise<void>;
  /**
   * A slow renderer: each request received in pass mode is held this long (ms, drawn per request) before it
   * is forwarded, whatever the mode becomes meanwhile (a request already rendering finishes). Null: none.
   */
  renderTime(draw: (() => number) | null): void;
  /** Arms a fault: it starts after `afterRequests` requests and, with `forMs`, ends by itself. */
  schedule(plan: FaultPlan): void;
  /** Resolves once an armed or timed fault has ended (at once when none is pending). */
  settled(): Promise<void>;
  /** Requests received in [from, to). */
  countBetween(from: number, to?: number): number;
  close(): Promise<void>;
}

const SERVICE_EXCEPTION = `<?xml version="1.0" encoding="UTF-8"?>
<ServiceExceptionReport version="1.3.0" xmlns="http://www.opengis.net/ogc" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <ServiceException>msDrawMap(): Image handling error. Failed to draw layer named 'quadrants'. msResampleGDALToMap(): General error message. Out of memory allocating raster buffer.</ServiceException>
</ServiceExceptionReport>`;

/** WIDTH and HEIGHT of a GetMap (either case), 256 when absent. */
function requestedSize(url: string | undefined): [number, number] {
  const q = new URL(url ?? '/', 'http://x').searchParams;
  const get = (name: string) => Number(q.get(name) ?? q.get(name.toLowerCase()) ?? 256) || 256;
  return [Math.min(4096, get('WIDTH')), Math.min(4096, get('HEIGHT'))];
}

async function blankPng(w: number, h: number): Promise<Buffer> {
  return sharp({ create: { width: w, height: h, channels: 3, background: { r: 255, g: 255, b: 255 } } })
    .png()
    .toBuffer();
}

/** An error drawn into an image: a frame and text on white, so it is not uniform even without fonts. */
async function errorPng(w: number, h: number): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">
<rect x="0" y="0" width="${w}" height="${h}" fill="white"/><rect x="4" y="4" width="${w - 8}" height="${h - 8}" fill="none" stroke="red" stroke-width="3"/>
<text x="10" y="${Math.round(h / 2)}" font-family="sans-serif" font-size="11" fill="black">msDrawMap(): Image handling error.</text></svg>`;
  return sharp(Buffer.from(svg)).flatten({ background: '#ffffff' }).png().toBuffer();
}

export async function startFaultProxy(upstreamUrl: string): Promise<FaultProxy> {
  const upstream = new URL(upstreamUrl);
  const agent = new Agent({ keepAlive: true });
  const sockets = new Set<Socket>();
  const hung = new Set<ServerResponse>();
  const log: ReceivedRequest[] = [];
  const images = new Map<string, Buffer>();
  let mode: FaultMode = 'pass';
  let opts: Required<FaultOptions> = { slowMs: 4_000, retryAfterS: 1 };
  let armed: FaultPlan | null = null;
  let armedAt = 0;
  let render: (() => number) | null = null;
  let endTimer: NodeJS.Timeout | null = null;
  let pending: Promise<void> = Promise.resolve();
  let settle: (() => void) | null = null;
  const times = { faultStartedAt: null as number | null, recoveredAt: null as number | null, dropped: 0 };

  const image = async (kind: 'blank' | 'error', w: number, h: number) => {
    const k = `${kind}-${w}x${h}`;
    let png = images.get(k);
    if (!png) images.set(k, (png = kind === 'blank' ? await blankPng(w, h) : await errorPng(w, h)));
    return png;
  };

  const forward = (req: IncomingMessage, res: ServerResponse, entry?: ReceivedRequest, retried = false) => {
    const started = Date.now();
    if (entry && !retried) res.on('finish', () => (entry.upstreamMs = Date.now() - started));
    const up = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, host: upstream.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on('error', () => {
      // lighttpd closes an idle keep-alive connection after 5 s; a request sent on one it had just closed is
      // sent again on a new one, as real proxies do (GetMaps are idempotent), not turned into a reset.
      if (up.reusedSocket && !retried && !res.headersSent && !res.destroyed) forward(req, res, entry, true);
      else res.destroy();
    });
    res.on('close', () => up.destroy());
    if (retried) up.end();
    else req.pipe(up);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (armed && mode === 'pass' && log.length - armedAt >= armed.afterRequests) {
      const plan = armed;
      armed = null;
      void set(plan.mode, plan);
      times.faultStartedAt = Date.now();
      if (plan.forMs !== undefined) endTimer = setTimeout(() => void end(), plan.forMs);
      else finish();
    }
    const entry: ReceivedRequest = {
      at: Date.now(),
      mode,
      ...(req.headers['user-agent'] === 'tilebreaker-probe' ? { selfProbe: true as const } : {}),
    };
    log.push(entry);
    switch (mode) {
      case 'pass': {
        if (!render) return forward(req, res, entry);
        const started = Date.now();
        const t = setTimeout(() => {
          forward(req, res);
          res.on('finish', () => (entry.upstreamMs = Date.now() - started));
        }, render());
        res.on('close', () => clearTimeout(t));
        return;
      }
      case 'hang':
        hung.add(res);
        res.on('close', () => hung.delete(res));
        return;
      case 'slow': {
        const t = setTimeout(() => forward(req, res), opts.slowMs);
        res.on('close', () => clearTimeout(t));
        return;
      }
      case 'service-exception':
        return res.writeHead(200, { 'content-type': 'application/vnd.ogc.se_xml' }).end(SERVICE_EXCEPTION);
      case '503':
        return res
          .writeHead(503, { 'content-type': 'text/plain', 'retry-after': String(opts.retryAfterS) })
          .end('Service Unavailable');
      case 'refused':
      case 'reset':
        return req.socket.destroy();
      case 'blank':
      case 'error-image': {
        const [w, h] = requestedSize(req.url);
        void image(mode === 'blank' ? 'blank' : 'error', w, h).then((png) =>
          res.writeHead(200, { 'content-type': 'image/png' }).end(png),
        );
        return;
      }
    }
  };

  const server: Server = createServer(handle);
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const finish = () => {
    settle?.();
    settle = null;
  };
  const end = async () => {
    endTimer = null;
    await set('pass');
    times.recoveredAt = Date.now();
    finish();
  };

  // The mode changes at once (the request that starts a fault is answered in it); refused closes and reopens
  // the listener, in order.
  const set = (next: FaultMode, o: FaultOptions = {}): Promise<void> => {
    const prev = mode;
    mode = next;
    opts = { slowMs: o.slowMs ?? 4_000, retryAfterS: o.retryAfterS ?? 1 };
    if (prev === 'hang' && next !== 'hang') {
      // As a stalled proxy that comes back: the connections it held are dropped, not answered.
      times.dropped = hung.size;
      for (const res of hung) res.socket?.destroy();
      hung.clear();
    }
    if (next === 'refused' && prev !== 'refused') {
      pending = pending.then(async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const s of sockets) s.destroy();
        await closed;
      });
    }
    if (prev === 'refused' && next !== 'refused')
      pending = pending.then(() => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)));
    return pending;
  };

  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}${upstream.search}`,
    port,
    get mode() {
      return mode;
    },
    log,
    get faultStartedAt() {
      return times.faultStartedAt;
    },
    get recoveredAt() {
      return times.recoveredAt;
    },
    get held() {
      return hung.size;
    },
    get dropped() {
      return times.dropped;
    },
    set,
    renderTime(draw) {
      render = draw;
    },
    schedule(plan) {
      armed = plan;
      armedAt = log.length;
      times.faultStartedAt = null;
      times.recoveredAt = null;
    },
    settled() {
      if (!armed && !endTimer) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const prev = settle;
        settle = () => {
          prev?.();
          resolve();
        };
      });
    },
    countBetween: (from, to = Infinity) => log.filter((r) => r.at >= from && r.at < to).length,
    close: async () => {
      if (endTimer) clearTimeout(endTimer);
      armed = null;
      finish();
      await pending;
      for (const res of hung) res.socket?.destroy();
      for (const s of sockets) s.destroy();
      agent.destroy();
      if (mode !== 'refused') await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
