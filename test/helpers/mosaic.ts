import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { DemoTileServer } from '../../src/demo/tile-server';
import { tileBounds } from '../../src/geo/mercator';
import type { ManifestTile, MosaicRequest, MosaicResult, StatusCounts } from '../../src/messages/mosaic-types';

export interface Manifest {
  total: number;
  counts: StatusCounts;
  partial: boolean;
  geoTransform: number[];
  tiles: ManifestTile[];
  files: string[];
}

export function readManifest(result: Pick<MosaicResult, 'manifest'>): Manifest {
  return JSON.parse(readFileSync(result.manifest, 'utf8')) as Manifest;
}

/** Every planned tile exactly once, in order, and the counts add up. */
export function assertAccounted(m: Manifest): string | null {
  if (m.tiles.length !== m.total) return `manifest lists ${m.tiles.length} tiles, plan has ${m.total}`;
  for (let i = 0; i < m.total; i++) if (m.tiles[i]!.i !== i) return `tile ${i} is listed as ${m.tiles[i]!.i}`;
  const sum = Object.values(m.counts).reduce((a, b) => a + b, 0);
  if (sum !== m.total) return `counts add up to ${sum}, not ${m.total}`;
  return null;
}

export const gdalAvailable = () => spawnSync('gdalinfo', ['--version']).status === 0;

export function gdalinfo(file: string): {
  geoTransform: number[];
  coordinateSystem: { wkt: string };
  size: number[];
  bands: { overviews?: unknown[] }[];
  stac?: Record<string, unknown>;
} {
  return JSON.parse(execFileSync('gdalinfo', ['-json', file], { encoding: 'utf8' })) as ReturnType<typeof gdalinfo>;
}

/** 13 x 10 = 130 tiles at zoom 8 over the Alps from the demo tile server `s`, written to `<dir>/<name>.tif`. */
export function demoRequest(
  s: DemoTileServer,
  dir: string,
  name: string,
  extra: Partial<MosaicRequest> = {},
): MosaicRequest {
  return {
    source: {
      type: 'xyz',
      url: s.template,
      concurrency: 2,
      timeouts: { connectMs: 1_000, headersMs: 2_000, bodyMs: 2_000, totalMs: 3_000 },
    },
    sourceName: 'demo',
    bbox: [2.0, 42.0, 19.5, 49.9],
    zoom: 8,
    output: path.join(dir, `${name}.tif`),
    batchSize: 16,
    parallelBatches: 2,
    ...extra,
  };
}

/**
 * `cols` x `rows` tiles at zoom 12 from `x0`,`y0` (EPSG:3857 corners) from the demo tile server `s` at 2
 * requests per worker, written to `<dir>/<name>/mosaic.tif`.
 */
export function tileBoxRequest(
  s: DemoTileServer,
  dir: string,
  name: string,
  box: { cols: number; rows: number; x0?: number; y0?: number },
  extra: Partial<MosaicRequest> = {},
): MosaicRequest {
  const { cols, rows, x0 = 2100, y0 = 1400 } = box;
  const nw = tileBounds(12, x0, y0);
  const se = tileBounds(12, x0 + cols - 1, y0 + rows - 1);
  return {
    source: { type: 'xyz', url: s.template, concurrency: 2 },
    sourceName: 'demo',
    bbox: [nw.minX, se.minY, se.maxX, nw.maxY],
    crs: 'EPSG:3857',
    zoom: 12,
    output: path.join(dir, name, 'mosaic.tif'),
    ...extra,
  };
}
