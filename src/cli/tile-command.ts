import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeFetchBatch } from '../activities/fetch/fetch-batch';
import { BreakerGuard, processIdentity, witnessIdentity } from '../activities/guard';
import { redactUrl } from '../activities/http/credentials';
import { EndpointPools } from '../activities/http/endpoint-pool';
import { gridLevelSize } from '../geo/grid';
import { checkTile } from '../geo/mercator';
import { tileUrl } from '../sources/request-url';
import { connectionConfigFromEnv } from '../client/connection-config';
import { loadSource } from '../activities/sources-file';
import { connectClient } from '../client/temporal';

export interface TileCommandOptions {
  source: string;
  name?: string;
  breaker?: boolean;
  attempts: string;
  out?: string;
}

/** `tilebreaker tile Z/X/Y --source FILE`: one tile through the pipeline's own fetch path, as one JSON object. */
export async function tileCommand(address: string, opts: TileCommandOptions): Promise<number> {
  const m = /^(\d+)\/(\d+)\/(\d+)$/.exec(address);
  if (!m) throw new Error(`tile: expected Z/X/Y, e.g. 12/2048/1361 (got ${JSON.stringify(address)})`);
  const tile = { z: Number(m[1]), x: Number(m[2]), y: Number(m[3]) };
  const attempts = Number(opts.attempts);
  if (!Number.isInteger(attempts) || attempts < 1 || attempts > 10)
    throw new Error(`--attempts: expected 1..10 (got ${JSON.stringify(opts.attempts)})`);
  const { name, source } = await loadSource(opts.source, opts.name);
  if (tile.z < source.minZoom || tile.z > source.maxZoom)
    throw new Error(`tile: zoom ${tile.z} is outside source ${name}'s range ${source.minZoom}..${source.maxZoom}`);
  // A source on a grid of its own has that grid's levels and tiles; the others, Web Mercator's.
  if (source.grid) {
    if (tile.z >= source.grid.resolutions.length)
      throw new Error(
        `tile: zoom ${tile.z} is not a level of source ${name}'s grid (0..${source.grid.resolutions.length - 1})`,
      );
    const { cols, rows } = gridLevelSize(source.grid, tile.z, source.tileSize);
    if (tile.x >= cols || tile.y >= rows)
      throw new Error(`tile: ${address} is outside source ${name}'s grid, ${cols} x ${rows} tiles at level ${tile.z}`);
  } else checkTile(tile.z, tile.x, tile.y);

  const pools = new EndpointPools();
  const storeRoot = opts.out ?? mkdtempSync(path.join(tmpdir(), 'tilebreaker-tile-'));
  let guard: BreakerGuard | undefined;
  let closeClient: (() => Promise<void>) | undefined;
  try {
    if (opts.breaker) {
      const conn = connectionConfigFromEnv();
      if (!conn.address) throw new Error('--breaker: set TEMPORAL_ADDRESS to the server whose breakers to consult');
      const { client, connection } = await connectClient({ ...conn, address: conn.address });
      closeClient = () => connection.close();
      guard = new BreakerGuard({
        client,
        taskQueue: conn.taskQueue,
        reporter: processIdentity('tile-command'),
        witness: witnessIdentity(),
      });
    }
    const [result] = await makeFetchBatch({ pools, ...(guard ? { guard } : {}) })({
      sourceName: name,
      source,
      tiles: [tile],
      storeRoot,
      breaker: !!guard,
      retry: { attempts },
    });
    const r = result!;
    console.log(
      JSON.stringify(
        {
          tile: `${tile.z}/${tile.x}/${tile.y}`,
          source: name,
          url: redactUrl(tileUrl(source, tile), source.auth),
          status: r.status,
          outcome: r.kind ?? null,
          httpStatus: r.httpStatus ?? null,
          latencyMs: r.latencyMs === undefined ? null : Math.round(r.latencyMs * 10) / 10,
          bytes: r.bytes ?? 0,
          attempts: r.attempts,
          reason: r.reason,
          // The server's Retry-After (a 503, a 429) or the breaker's, whichever decided the tile.
          retryAfterMs: r.retryAfterMs ?? null,
          ...(r.breakerState ? { breakerState: r.breakerState } : {}),
          ...(opts.out && r.path ? { path: r.path } : {}),
        },
        null,
        2,
      ),
    );
    return r.status === 'ok' ? 0 : 1;
  } finally {
    await guard?.close();
    await closeClient?.();
    await pools.close();
    if (!opts.out) rmSync(storeRoot, { recursive: true, force: true });
  }
}
