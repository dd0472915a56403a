import { Agent, interceptors, type Dispatcher } from 'undici';
import type { SourceConfig } from '../../sources/schema';

/**
 * One undici dispatcher per source: keep-alive connections per origin limited to the source's concurrency,
 * connect / headers / body timeouts, a response size cap that aborts the body past the limit, and bounded
 * redirects. Shared by every fetch of the process, so connections are reused across batches.
 */
export class EndpointPools {
  private readonly pools = new Map<string, Dispatcher>();

  /** The dispatcher for `source`; sources with the same settings share one. */
  for(source: SourceConfig): Dispatcher {
    // maxBytes is per tile: a metatile response may carry all of its tiles.
    const cells = source.type === 'wms' && source.metatile ? source.metatile.size[0] * source.metatile.size[1] : 1;
    const maxBytes = source.maxBytes * cells;
    const id = JSON.stringify([source.concurrency, source.timeouts, maxBytes, source.maxRedirects]);
    let pool = this.pools.get(id);
    if (!pool) {
      const agent = new Agent({
        connections: source.concurrency,
        connect: { timeout: source.timeouts.connectMs },
        headersTimeout: source.timeouts.headersMs,
        bodyTimeout: source.timeouts.bodyMs,
        maxResponseSize: maxBytes,
        keepAliveTimeout: 30_000,
      });
      pool = source.maxRedirects > 0 ? agent.compose(interceptors.redirect({ maxRedirections: source.maxRedirects })) : agent;
      this.pools.set(id, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}
