import type { WorkflowHandle } from '@temporalio/client';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { statusQuery } from '../../src/messages/breaker';
import { gradientImage } from './images';

/** A request the server received: when, from which worker (its x-worker header), what it answered and when. */
export interface Hit {
  at: number;
  worker: string;
  status: number;
  answeredAt: number;
}

export interface WaitAskingServer {
  url: string;
  hits: Hit[];
  /** The first answer that asked to wait, once it has gone out. */
  first: Promise<Hit>;
  close(): Promise<void>;
}

/**
 * A tile server that, once it has served `from` requests, answers every request `status` (429 or 503) with
 * `Retry-After: retryAfterS` for `forMs`, and a good tile otherwise, each after 20 ms; it logs every request
 * with the worker that sent it.
 */
export async function startWaitAskingServer(opts: {
  from: number;
  forMs: number;
  status: 429 | 503;
  retryAfterS: number;
}): Promise<WaitAskingServer> {
  const png = await gradientImage(256, 256, 'png');
  const hits: Hit[] = [];
  let since: number | null = null;
  let answered: (h: Hit) => void = () => {};
  const first = new Promise<Hit>((resolve) => (answered = resolve));
  const server: Server = createServer((req, res) => {
    const hit: Hit = { at: Date.now(), worker: String(req.headers['x-worker']), status: 200, answeredAt: 0 };
    if (hits.length >= opts.from) since ??= hit.at;
    if (since !== null && hit.at - since < opts.forMs) hit.status = opts.status;
    hits.push(hit);
    setTimeout(() => {
      hit.answeredAt = Date.now();
      if (hit.status !== 200) {
        answered(hit);
        res
          .writeHead(hit.status, { 'content-type': 'text/plain', 'retry-after': String(opts.retryAfterS) })
          .end(hit.status === 429 ? 'slow down' : 'renderer unavailable');
      } else res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    }, 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    first,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Reads the entity's status until its view shows the fleet's pause, until `deadline` (ms): when it did, 0 if never. */
export async function whenPausePublished(handle: WorkflowHandle, deadline: number): Promise<number> {
  while (Date.now() < deadline) {
    const v = await handle.query(statusQuery).then(
      (st) => st.view,
      () => null,
    );
    if (v?.pacedUntil !== undefined) return Date.now();
    await new Promise((r) => setTimeout(r, 20));
  }
  return 0;
}
