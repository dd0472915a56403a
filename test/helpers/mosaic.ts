import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { ManifestTile, MosaicResult, StatusCounts } from '../../src/messages/mosaic-types';

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

export function gdalinfo(file: string): { geoTransform: number[]; coordinateSystem: { wkt: string }; size: number[]; bands: { overviews?: unknown[] }[]; stac?: Record<string, unknown> } {
  return JSON.parse(execFileSync('gdalinfo', ['-json', file], { encoding: 'utf8' })) as ReturnType<typeof gdalinfo>;
}
