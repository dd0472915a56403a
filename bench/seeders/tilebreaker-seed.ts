/**
 * tilebreaker's side of bench:seeders: the pipeline's own fetch code (request units, undici pool, validation,
 * metatile cutting, the tile store), called directly like a seeder, with no Temporal and no breaker, so the
 * comparison with mapproxy-seed and mapcache_seed is of the fetch path alone.
 */
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { TileStore } from '../../src/activities/tile-store/tile-store';
import { parseSource } from '../../src/sources/schema';

export interface TilebreakerSeedOptions {
  wmsUrl: string;
  layers: string;
  version: '1.1.1' | '1.3.0';
  z: number;
  xMin: number;
  xMax: number;
  yMin: number;
  yMax: number;
  concurrency: number;
  metatile: { size: number; buffer: number } | null;
  storeRoot: string;
}

export async function seedWithTilebreaker(
  o: TilebreakerSeedOptions,
): Promise<{ tiles: number; failed: number; tilePath(z: number, x: number, y: number): string }> {
  const source = parseSource({
    type: 'wms',
    url: o.wmsUrl,
    version: o.version,
    layers: o.layers.split(','),
    format: 'image/png',
    transparent: false,
    concurrency: o.concurrency,
    ...(o.metatile ? { metatile: { size: [o.metatile.size, o.metatile.size], buffer: o.metatile.buffer } } : {}),
  });
  const tiles = [];
  // Row by row of metatiles, as the seeders walk their grids.
  for (let y = o.yMin; y <= o.yMax; y++) for (let x = o.xMin; x <= o.xMax; x++) tiles.push({ z: o.z, x, y });
  const pools = new EndpointPools();
  try {
    const fetchTiles = makeFetchBatch({ pools });
    const results = await fetchTiles({
      sourceName: 'bench',
      source,
      tiles,
      storeRoot: o.storeRoot,
      breaker: false,
      retry: { attempts: 1 },
    });
    const failed = results.filter((r) => r.status !== 'ok');
    if (failed.length) console.error(`  tilebreaker: ${failed.length} tiles not ok, first: ${failed[0]!.reason}`);
    const store = new TileStore(o.storeRoot);
    return {
      tiles: results.length,
      failed: failed.length,
      tilePath: (z, x, y) => `${store.dir('bench', { z, x, y })}/${y}.png`,
    };
  } finally {
    await pools.close();
  }
}
