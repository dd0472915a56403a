import { tileUrl, type ModeContext } from './fleet';
import { withRetry } from './retry';

/** `retry-only`: the retry policy alone, no breaker. Each worker fetches tile after tile. */
export async function runRetryOnlyMode(ctx: ModeContext): Promise<void> {
  const { scenario } = ctx;
  await ctx.runFleet((fetcher) => ({
    async step(seq, deadline) {
      const url = tileUrl(ctx.baseUrl, fetcher.worker, seq);
      await withRetry(() => fetcher.attempt(url, false), scenario.retry, scenario.retry.attempts, deadline);
    },
  }));
}
