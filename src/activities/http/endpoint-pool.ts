import { Agent, type Dispatcher } from 'undici';
import type { SourceConfig } from '../../sources/schema';

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

  /** The dispatcher for `source`; sources with the same settings share one. */
  for(source: SourceConfig): Dispatcher {
    // maxBytes is per tile: a metatile response may carry all of its tiles.
    const cells = source.type === 'wms' && source.metatile ? source.metatile.size[0] * source.metatile.size[1] : 1;
    // Capped whatever the metatile: each response in flight is buffered whole.
    const maxBytes = Math.min(source.maxBytes * cells, MAX_RESPONSE_BYTES);
    const id = JSON.stringify([source.concurrency, source.timeouts, maxBytes]);
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

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}
