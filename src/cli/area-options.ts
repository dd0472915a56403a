import { readFileSync } from 'node:fs';
import type { Command } from 'commander';

/** The area options `mosaic start` and `seed` take, in this order: --bbox, --coverage, --crs. */
export function addAreaOptions(cmd: Command): Command {
  return cmd
    .option('--bbox <w,s,e,n>', 'area: west,south,east,north (default: the bounds of --coverage)')
    .option(
      '--coverage <file.geojson>',
      'only the tiles overlapping this GeoJSON (Multi)Polygon, Feature or FeatureCollection, in --crs; read here and sent with the request',
    )
    .option(
      '--crs <crs>',
      'crs of --bbox: EPSG:4326 (lon/lat, default), EPSG:3857, or the CRS of the source grid (e.g. EPSG:2056)',
    );
}

/** `--bbox w,s,e,n` as four numbers. */
export function parseBbox(text: string): [number, number, number, number] {
  const parts = text.split(',').map((v) => v.trim());
  const bbox = parts.map(Number);
  if (bbox.length !== 4 || parts.some((p) => p === '') || bbox.some((v) => !Number.isFinite(v))) {
    throw new Error(`--bbox: must be four numbers west,south,east,north (got ${JSON.stringify(text)})`);
  }
  return bbox as [number, number, number, number];
}

/**
 * `--coverage FILE`: the user's own GeoJSON, read here and sent inline, so a worker never opens a path a
 * requester names. Its shape is checked with the request (the positions, the rings, the size).
 */
export function readCoverageFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`--coverage: ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, {
      cause: err,
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    // The parser's message quotes the text; its position is enough to find the fault.
    const at = /position (\d+)/.exec((err as Error).message)?.[1];
    throw new Error(`--coverage: ${file}: not valid JSON${at !== undefined ? ` (at character ${at})` : ''}`, {
      cause: err,
    });
  }
}
