import { MAX_ZOOM } from '../geo/mercator';
import type { MosaicRequest, MosaicResult } from './mosaic-types';
import { ConfigError } from '../breaker/config-error';

/**
 * A seed as a user asks for it: a mosaic request's source, area, fallback and tile store, over a range of
 * zoom levels, into an MBTiles file. Each level runs as a mosaic that makes no image (a child workflow with
 * its own manifest and mask, `<into minus .mbtiles>.z<level>.manifest.json`), through the same breaker,
 * fallbacks, re-drive and metrics; then the served tiles of every level are packed into `into`.
 */
export type SeedRequest = Omit<
  MosaicRequest,
  'zoom' | 'output' | 'extraFormats' | 'sidecars' | 'image' | 'directChunks'
> & {
  /** The first and last zoom level, both included. */
  levels: [number, number];
  /**
   * The MBTiles file to write, ending in .mbtiles: a local path under the worker's output roots, or an
   * `s3://` URL under its bucket roots (written locally, then uploaded; the levels' files go beside it there).
   */
  into: string;
};

export interface SeedResult {
  into: string;
  /** Tiles in the file: those this run served, and those kept from the earlier file. */
  tiles: number;
  /** Tiles kept from the earlier file: a level that served less (a failed night, levels not run) keeps what it had. */
  kept?: number;
  /** Why the earlier file's tiles were not kept, when there was one. */
  earlierNotKept?: string;
  /** Each level's mosaic result (its manifest and counts), in order; a level's configuration error ends the seed there. */
  levels: MosaicResult[];
  /** Levels the deadline passed before (not seeded). */
  notStarted: number[];
  /** Tiles recorded served whose file had gone from the store by the pack. */
  missing: number;
}

export interface PackMbtilesInput {
  into: string;
  /** Each level's output (the `.tif` path its plan, manifest and journals are named after). */
  outputs: string[];
  /** The tileset's name in the MBTiles metadata. */
  name: string;
}

export interface PackMbtilesResult {
  into: string;
  /** Tiles in the file: this run's and those kept from the earlier file. */
  tiles: number;
  /** Tiles kept from the file this one replaced, which this run did not serve (absent before the rule). */
  kept?: number;
  /** Why the earlier file's tiles were not kept (its format differs, it is no MBTiles file). */
  earlierNotKept?: string;
  levels: { zoom: number; tiles: number; total: number }[];
  /** Tiles a level recorded served whose file had gone from the store by the pack (not packed). */
  missing: number;
}

/** The seed's own fields, checked before any level starts; errors name the field and the value. */
export function checkSeedRequest(r: SeedRequest): { levels: number[]; base: string } {
  // A ConfigError, as every refused request is (the CLI prints it as `invalid`, with its issue); same message as before.
  const bad = (field: string, what: string, value: unknown) =>
    new ConfigError('seed request', [`${field}: ${what} (got ${JSON.stringify(value)})`]);
  if (typeof r !== 'object' || r === null) throw bad('request', 'must be an object', r);
  const lv = r.levels as unknown;
  if (!Array.isArray(lv) || lv.length !== 2 || !lv.every((z) => Number.isInteger(z) && z >= 0 && z <= MAX_ZOOM)) {
    throw bad('levels', `must be [first, last], whole zoom levels 0..${MAX_ZOOM}`, lv);
  }
  const [first, last] = lv as [number, number];
  if (first > last) throw bad('levels', 'the first level must not be after the last', lv);
  if (typeof r.into !== 'string' || !/\.mbtiles$/i.test(r.into))
    throw bad('into', 'must be a path or an s3:// URL ending in .mbtiles', r.into);
  for (const f of ['zoom', 'output', 'extraFormats', 'image', 'sidecars'] as const) {
    if (f in (r as Record<string, unknown>))
      throw bad(f, 'is a mosaic field; a seed takes levels and into', (r as Record<string, unknown>)[f]);
  }
  // Chunks are images of 2048 px, not tiles: a tile cache needs the tiles.
  if ((r as { directChunks?: unknown }).directChunks === true)
    throw bad('directChunks', 'a seed fetches tiles, not chunks', true);
  return {
    levels: Array.from({ length: last - first + 1 }, (_, k) => first + k),
    base: r.into.replace(/\.mbtiles$/i, ''),
  };
}
