import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { takeAction } from './actions';
import { MosaicsView } from './mosaics-view';
import { OverviewCache } from './overview';
import { serveRead } from './reads';
import { answerFor, sendJson } from './replies';
import type { ConsoleOptions, ConsoleSite } from './site';

export type { ConsoleOptions } from './site';

export interface ConsoleServer {
  url: string;
  close(): Promise<void>;
}

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
  const mosaics = new MosaicsView(opts.client, opts.roots);
  const overview = new OverviewCache({
    client: opts.client,
    mosaics,
    allowActions: !!opts.allowActions,
    now: opts.now ?? Date.now,
  });
  const site: ConsoleSite = { opts, origin: '', mosaics, overview };
  const server: Server = createServer((req, res) => {
    handle(site, req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        const [status, text] = answerFor(err);
        sendJson(res, status, { error: text });
      } else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  site.origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    url: `${site.origin}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Any request: answered only when it names this server as its Host; a POST is an action, a GET a read. */
async function handle(site: ConsoleSite, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.headers.host !== new URL(site.origin).host)
    return sendJson(res, 421, { error: `this console answers to ${new URL(site.origin).host} only` });
  const url = new URL(req.url ?? '/', site.origin);
  const route = url.pathname;
  if (req.method === 'POST') return takeAction(site, req, res, route);
  if (req.method !== 'GET') return sendJson(res, 405, { error: `${req.method} is not served here` });
  return serveRead(site, req, res, route);
}
