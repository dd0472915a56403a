/**
 * mapproxy-seed (Debian's mapproxy) for bench:seeders: mapproxy.yaml (a wms source at the counting proxy, a
 * file cache in GLOBAL_WEBMERCATOR, origin nw) and seed.yaml (the levels, a bbox coverage), then
 * `mapproxy-seed -f mapproxy.yaml -s seed.yaml -c N --seed ALL`.
 *
 * - Metatiles: `meta_size [m, m]` with `meta_buffer` b (MapProxy's defaults are [4, 4] and 80 px). One tile
 *   per request is `meta_size [1, 1]` with `meta_buffer 0`: MapProxy keeps using a buffered metatile of one
 *   tile when only meta_size is [1, 1] (cache/tile.py: `if meta_buffer or meta_size != [1, 1]`).
 * - `globals.image.paletted: false`: MapProxy quantizes PNG tiles to 256 colours by default, which would make
 *   its tiles differ from the server's pixels; off, it stores the pixels as rendered.
 * - `directory_layout: tms` writes <z>/<x>/<y>.png; in a grid with origin nw, MapProxy's y counts from the top,
 *   so the files are at XYZ rows (the bench checks the set on disk).
 * - Coverage: MapProxy seeds the (meta)tiles whose bbox intersects the coverage with strict inequalities
 *   (grid.bbox_intersects); the bench passes the tile set's bounds shrunk by a quarter pixel.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';

export interface MapproxyConfig {
  dir: string;
  wmsUrl: string;
  layers: string;
  /** The zoom levels to seed. */
  levels: number[];
  extent: [number, number, number, number];
  metatile: { size: number; buffer: number } | null;
}

export function writeMapproxyConfig(c: MapproxyConfig): { mapproxyYaml: string; seedYaml: string; tileRoot: string } {
  const tileRoot = path.join(c.dir, 'tiles');
  const mapproxy = {
    services: { demo: null },
    layers: [{ name: 'bench', title: 'bench', sources: ['bench_cache'] }],
    caches: {
      bench_cache: {
        grids: ['GLOBAL_WEBMERCATOR'],
        sources: ['bench_wms'],
        format: 'image/png',
        meta_size: c.metatile ? [c.metatile.size, c.metatile.size] : [1, 1],
        meta_buffer: c.metatile ? c.metatile.buffer : 0,
        cache: { type: 'file', directory: tileRoot, directory_layout: 'tms' },
      },
    },
    sources: {
      bench_wms: {
        type: 'wms',
        supported_srs: ['EPSG:3857'],
        wms_opts: { version: '1.1.1' },
        http: { client_timeout: 600 },
        req: { url: c.wmsUrl, layers: c.layers, transparent: false },
      },
    },
    globals: {
      image: { paletted: false },
      cache: {
        base_dir: path.join(c.dir, 'cache_data'),
        lock_dir: path.join(c.dir, 'locks'),
        tile_lock_dir: path.join(c.dir, 'tile_locks'),
      },
    },
  };
  const seed = {
    seeds: {
      bench: { caches: ['bench_cache'], grids: ['GLOBAL_WEBMERCATOR'], levels: c.levels, coverages: ['tileset'] },
    },
    coverages: { tileset: { bbox: c.extent, srs: 'EPSG:3857' } },
  };
  const mapproxyYaml = path.join(c.dir, 'mapproxy.yaml');
  const seedYaml = path.join(c.dir, 'seed.yaml');
  writeFileSync(mapproxyYaml, stringify(mapproxy));
  writeFileSync(seedYaml, stringify(seed));
  return { mapproxyYaml, seedYaml, tileRoot };
}

export function mapproxySeedArgs(files: { mapproxyYaml: string; seedYaml: string }, concurrency: number): string[] {
  return ['-f', files.mapproxyYaml, '-s', files.seedYaml, '-c', String(concurrency), '--seed', 'ALL', '-q'];
}
