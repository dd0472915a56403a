import { Agent, type Dispatcher } from 'undici';
import type { SourceConfig } from '../../sources/schema';
import { Slots } from './slots';

/** The largest response any request may buffer (a 16 x 16 metatile of 8 MiB tiles would be 2 GiB). */
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

/**
 * One undici dispatcher per source: keep-alive connections per origin limited to the source's concurrency,
 * connect / headers / body timeouts, and a response size cap that aborts the body past the limit. Shared by
 * every fetch of the process, so connections are reused across batches. Redirects are not followed here but
 * by fetchUrl, under the source's redirect policy.
 */
export class EndpointPools {
  private readonly pools = new Map<string, Dispatcher>();
  private readonly slots = new Map<string, Slots>();

  /**
   * One of the source's `concurrency` connections to `url`'s origin in this process, waited for in a local
   * queue before the request is decided and sent: every parallel batch of every mosaic shares them, so
   * `concurrency` is per worker process and source, and no request waits inside the pool, where its queue
   * time would count as the endpoint's latency (tripping the latency and stall rules on local queueing) and
   * against its own total timeout. Null when `signal` aborts while queued.
   */
  slot(source: SourceConfig, url: string, signal?: AbortSignal): Promise<{ release(): void } | null> {
    let origin: string;
    try {
      origin = new URL(url).origin;
    } catch {
      origin = url;
    }
    const id = `${this.idOf(source)} ${origin}`;
    let s = this.slots.get(id);
    if (!s) this.slots.set(id, (s = new Slots(source.concurrency)));
    return s.acquire(signal);
  }

  /** The dispatcher for `source`; sources with the same settings share one. */
  for(source: SourceConfig): Dispatcher {
    const maxBytes = maxBytesOf(source);
    const id = this.idOf(source);
    let pool = this.pools.get(id);
    if (!pool) {
      pool = new Agent({
        connections: source.concurrency,
        connect: { timeout: source.timeouts.connectMs },
        headersTimeout: source.timeouts.headersMs,
        bodyTimeout: source.timeouts.bodyMs,
        maxResponseSize: maxBytes,
        keepAliveTimeout: 30_000,
      });
      this.pools.set(id, pool);
    }
    return pool;
  }

  private idOf(source: SourceConfig): string {
    return JSON.stringify([source.concurrency, source.timeouts, maxBytesOf(source)]);
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

/** maxBytes is per tile: a metatile response may carry all of its tiles; capped, as each response in flight is buffered whole. */
function maxBytesOf(source: SourceConfig): number {
  const cells = source.type === 'wms' && source.metatile ? source.metatile.size[0] * source.metatile.size[1] : 1;
  return Math.min(source.maxBytes * cells, MAX_RESPONSE_BYTES);
}
