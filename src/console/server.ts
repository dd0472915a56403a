import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { confineLocation } from '../activities/confine/confine-location';
import type { WorkerRoots } from '../activities/confine/roots';
import { ConfigError } from '../breaker/config-error';
import { adminBreaker, type BreakerAdminAction } from '../client/breakers';
import { mosaicStatus, startRedrive } from '../client/mosaics';
import { pageBreakers } from './breakers-view';
import { MosaicsView, NotFound } from './mosaics-view';

export interface ConsoleOptions {
  client: Client;
  /** The fleet's task queue: where a re-drive runs, and where an admin action starts an entity that is not running. */
  taskQueue: string;
  /** Where the worker writes: the console reads manifests and images only under these. */
  roots: WorkerRoots;
  /** 127.0.0.1 unless told otherwise. */
  host?: string;
  /** 0: any free port. */
  port?: number;
  /** Re-drive mosaics and open, force closed or reset breakers from the page. Off: the page only reads. */
  allowActions?: boolean;
  /** Who the page's actions are recorded as (the actor, claimed); the sender is this process, as for the CLI. */
  actor?: string;
  /** The clock (tests). */
  now?: () => number;
}

export interface ConsoleServer {
  url: string;
  close(): Promise<void>;
}

/** The page and its script: files in the package (its `files` list), beside the compiled code's source. */
const STATIC_DIR = path.resolve(__dirname, '../../../src/console/static');
const STATIC: Record<string, string> = {
  '/': 'index.html',
  '/console.js': 'console.js',
  '/console.css': 'console.css',
};
/** The map library, served from the installed package (no internet): only these files. */
const leafletDir = () => path.dirname(require.resolve('leaflet/dist/leaflet.js'));
const OVERVIEW_TTL_MS = 1_000;
const VENDOR: Record<string, string> = {
  '/vendor/leaflet.js': 'leaflet.js',
  '/vendor/leaflet.css': 'leaflet.css',
  '/vendor/images/marker-icon.png': 'images/marker-icon.png',
  '/vendor/images/marker-shadow.png': 'images/marker-shadow.png',
  '/vendor/images/layers.png': 'images/layers.png',
};
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
};

const ADMIN: Record<string, BreakerAdminAction> = { open: 'force-open', 'force-close': 'force-close', reset: 'reset' };

/**
 * `tilebreaker console`: a web page on 127.0.0.1 showing the fleet's breakers (state, why, time open, a
 * timeline of transitions and probes, reporters) and its mosaics (progress, counts, a map of each finished one
 * with its tiles coloured by status). Read-only unless `allowActions`.
 *
 * Anyone who can load a page in a browser on this machine could otherwise drive it: requests must name this
 * server as their Host (a DNS-rebinding page cannot), and an action must come from the console's own page
 * (Origin) as JSON, so a form on another site cannot post one.
 */
export async function startConsole(opts: ConsoleOptions): Promise<ConsoleServer> {
  const host = opts.host ?? '127.0.0.1';
  const now = opts.now ?? Date.now;
  const mosaics = new MosaicsView(opts.client, opts.roots);
  let origin = '';
  // Every open page reads the overview each second: one read at a time serves them all, for a second.
  let overview: { at: number; body: Promise<unknown> } | null = null;
  const readOverview = (): Promise<unknown> => {
    const t = now();
    if (overview && t - overview.at < OVERVIEW_TTL_MS) return overview.body;
    const body = Promise.all([pageBreakers(opts.client, t), mosaics.list()]).then(([breakers, list]) => ({
      now: t,
      allowActions: !!opts.allowActions,
      breakers,
      mosaics: list,
    }));
    overview = { at: t, body };
    // A failed read is not served to the next page.
    body.catch(() => {
      if (overview?.body === body) overview = null;
    });
    return body;
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        const [status, text] = answerFor(err);
        sendJson(res, status, { error: text });
      } else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.headers.host !== new URL(origin).host)
      return sendJson(res, 421, { error: `this console answers to ${new URL(origin).host} only` });
    const url = new URL(req.url ?? '/', origin);
    const route = url.pathname;
    if (req.method === 'POST') return action(req, res, route);
    if (req.method !== 'GET') return sendJson(res, 405, { error: `${req.method} is not served here` });
    if (STATIC[route]) return sendFile(res, path.join(STATIC_DIR, STATIC[route]));
    if (VENDOR[route]) return sendFile(res, path.join(leafletDir(), VENDOR[route]));
    // The page's reads come from the page: another site's <img> or script cannot make the console read a
    // manifest or decode an image (browsers send Sec-Fetch-Site; a tool without it is not a browser).
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none')
      return sendJson(res, 403, { error: "the console's data is for its own page" });
    if (route === '/api/overview') return sendJson(res, 200, await readOverview());
    const m = /^\/api\/mosaics\/([^/]+)(?:\/(tiles\/(\d+)|preview\.png))?$/.exec(route);
    if (m) {
      const id = decodeURIComponent(m[1]!);
      if (m[3] !== undefined) return sendJson(res, 200, await mosaics.tile(id, Number(m[3])));
      if (m[2] === 'preview.png') {
        const png = await mosaics.preview(id);
        res.writeHead(200, {
          'content-type': 'image/png',
          'cache-control': 'no-store',
          'cross-origin-resource-policy': 'same-origin',
        });
        res.end(png);
        return;
      }
      return sendJson(res, 200, await mosaics.detail(id));
    }
    return sendJson(res, 404, { error: `nothing at ${route}` });
  }

  async function action(req: IncomingMessage, res: ServerResponse, route: string): Promise<void> {
    if (!opts.allowActions)
      return sendJson(res, 403, {
        error:
          'actions are off: this console is read-only (start it with --allow-actions to re-drive mosaics and open, force closed or reset breakers)',
      });
    if (req.headers.origin !== origin)
      return sendJson(res, 403, { error: "actions are taken from the console's own page only" });
    if (!/^application\/json\b/.test(req.headers['content-type'] ?? ''))
      return sendJson(res, 415, { error: 'an action is sent as application/json' });
    const body = await readBody(req);
    overview = null;
    const b = /^\/api\/breakers\/(open|force-close|reset)$/.exec(route);
    if (b) {
      const key = typeof body['key'] === 'string' ? body['key'] : '';
      if (!key) return sendJson(res, 400, { error: 'key: a breaker key is required' });
      const reason =
        typeof body['reason'] === 'string' && body['reason'] ? body['reason'].slice(0, 200) : 'from the console';
      const r = await adminBreaker(opts.client, key, ADMIN[b[1]!]!, {
        taskQueue: opts.taskQueue,
        reason,
        ...(opts.actor ? { actor: opts.actor } : {}),
      });
      return sendJson(res, 200, {
        key: r.key,
        action: r.action,
        confirmed: r.confirmed,
        state: r.status.view.state,
        transition: r.transition,
      });
    }
    if (route === '/api/mosaics/redrive') {
      const id = typeof body['workflowId'] === 'string' ? body['workflowId'] : '';
      if (!id) return sendJson(res, 400, { error: 'workflowId: a mosaic workflow id is required' });
      // The manifest the mosaic's own result names, checked against the roots as the page's reads are.
      const s = await mosaicStatus(opts.client, id);
      if (!s.result)
        return sendJson(res, 409, { error: `mosaic ${id} has no manifest to re-drive (${s.status.toLowerCase()})` });
      const manifest = await confineLocation(s.result.manifest, opts.roots, 'manifest', 'the console');
      const started = await startRedrive(opts.client, opts.taskQueue, manifest);
      return sendJson(res, 200, { workflowId: started });
    }
    return sendJson(res, 404, { error: `no action at ${route}` });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    url: `${origin}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An error's status and text for the page: known kinds say what happened, nothing quotes a path's content or a stack. */
function answerFor(err: unknown): [number, string] {
  if (err instanceof NotFound) return [404, err.message];
  if (err instanceof URIError) return [400, 'the address is not validly encoded'];
  if (err instanceof BodyTooLarge) return [413, err.message];
  if (err instanceof ConfigError)
    return [
      403,
      "outside this console's roots (TILEBREAKER_OUTPUT_DIR, TILEBREAKER_OUTPUT_BUCKETS): it reads a worker's outputs only where the worker may write",
    ];
  if (err instanceof WorkflowNotFoundError) return [404, 'no such workflow'];
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return [500, `a file could not be read here (${code})`];
  return [500, err instanceof Error ? err.message : String(err)];
}

class BodyTooLarge extends Error {}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'cross-origin-resource-policy': 'same-origin',
  });
  res.end(JSON.stringify(body));
}

async function sendFile(res: ServerResponse, file: string): Promise<void> {
  const body = await readFile(file);
  res.writeHead(200, {
    'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    'x-content-type-options': 'nosniff',
    // The page runs only its own script and the bundled map library: no inline script, nothing from elsewhere.
    'content-security-policy':
      "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 16_384) throw new BodyTooLarge('the request body is too large for an action');
    chunks.push(c);
  }
  try {
    const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    throw new Error('the action body is not JSON');
  }
}
