/**
 * Batches and blocks of a WMS mosaic that keep each metatile whole. The fetch groups a batch's tiles into
 * metatiles on the grid aligned to 0/0 (one GetMap each); a batch cut in row order splits the metatiles on its
 * edges, so an area needed up to 4x the minimum number of GetMaps. Pure: the workflows plan with it.
 */
import type { MosaicPlan, TileGrid, TileSelection } from './mosaic-types';
import { selectionIndices } from './mosaic-types';

/** The plan's metatile size (columns, rows), or null when its requests are single tiles. */
export function planMetatile(plan: Pick<MosaicPlan, 'source'>): [number, number] | null {
  const s = plan.source;
  if (s.type !== 'wms' || !s.metatile) return null;
  const [c, r] = s.metatile.size;
  return c * r > 1 ? [c, r] : null;
}

const cols = (g: TileGrid) => g.xMax - g.xMin + 1;

/**
 * `sel`'s tiles in batches of whole metatiles: metatiles in row-major order, each metatile's tiles together,
 * packed into batches of at most `batchSize` tiles (a metatile larger than a batch is split across batches
 * of its own). Every tile of `sel` is in exactly one batch.
 */
export function metatileBatches(
  grid: TileGrid,
  sel: TileSelection,
  size: [number, number],
  batchSize: number,
): TileSelection[] {
  const [mc, mr] = size;
  const n = cols(grid);
  const groups = new Map<string, number[]>();
  for (const i of selectionIndices(sel)) {
    const x = grid.xMin + (i % n);
    const y = grid.yMin + Math.floor(i / n);
    const k = `${Math.floor(y / mr)}/${Math.floor(x / mc)}`;
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  }
  // Row-major order of metatiles: by metatile row, then column.
  const ordered = [...groups.entries()]
    .map(([k, members]) => ({ row: Number(k.split('/')[0]), col: Number(k.split('/')[1]), members }))
    .sort((a, b) => a.row - b.row || a.col - b.col);
  const out: TileSelection[] = [];
  let batch: number[] = [];
  for (const { members } of ordered) {
    if (batch.length > 0 && batch.length + members.length > batchSize) {
      out.push({ indices: batch });
      batch = [];
    }
    for (let k = 0; k < members.length; k += batchSize) {
      const part = members.slice(k, k + batchSize);
      if (batch.length + part.length > batchSize) {
        out.push({ indices: batch });
        batch = [];
      }
      batch.push(...part);
    }
  }
  if (batch.length > 0) out.push({ indices: batch });
  return out;
}

/**
 * A contiguous range of the grid (or a list of indices) in blocks of at most `blockTiles` tiles that end on
 * metatile row bands, so no metatile is split between two blocks: a range stays a range per block. A band
 * larger than `blockTiles` is cut at that size.
 */
export function metatileBlocks(grid: TileGrid, sel: TileSelection, rows: number, blockTiles: number): TileSelection[] {
  const n = cols(grid);
  const indices = selectionIndices(sel);
  const bandOf = (i: number) => Math.floor((grid.yMin + Math.floor(i / n)) / rows);
  const out: number[][] = [];
  let block: number[] = [];
  let k = 0;
  while (k < indices.length) {
    // One band: the consecutive indices in the same metatile row.
    const band = bandOf(indices[k]!);
    let end = k;
    while (end < indices.length && bandOf(indices[end]!) === band) end++;
    const tiles = indices.slice(k, end);
    if (block.length > 0 && block.length + tiles.length > blockTiles) {
      out.push(block);
      block = [];
    }
    for (let j = 0; j < tiles.length; j += blockTiles) {
      const part = tiles.slice(j, j + blockTiles);
      if (block.length + part.length > blockTiles) {
        out.push(block);
        block = [];
      }
      block.push(...part);
    }
    k = end;
  }
  if (block.length > 0) out.push(block);
  const contiguous = !('indices' in sel);
  return out.map((b) => (contiguous ? { start: b[0]!, count: b.length } : { indices: b }));
}
