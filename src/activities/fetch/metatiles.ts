import sharp from 'sharp';
import { gridLevelSize } from '../../geo/grid';
import { resolution } from '../../geo/mercator';
import { getMapUrl, sourceTileBounds, tileUrl, type TileAddress } from '../../sources/request-url';
import type { SourceConfig } from '../../sources/schema';
import type { DecodedPixels } from '../validate/image-check';

/** Where a metatile's tiles sit in the response: the buffer's offsets and each member's cell. */
export interface MetaCut {
  left: number;
  top: number;
  /** [column, row] in the metatile of each member, in member order. */
  cells: [number, number][];
}

/** One HTTP request: a tile, or a WMS metatile covering several tiles of the batch. */
export interface RequestUnit {
  /** Indices into the batch's tiles. */
  members: number[];
  url: string;
  /** The size the response must have. */
  width: number;
  height: number;
  meta: MetaCut | null;
}

/**
 * Groups a batch's tiles into requests. Without `metatile` (or for non-WMS sources): one per tile. With it:
 * one GetMap per metatile of size.cols x size.rows tiles on the grid aligned to 0/0, covering only the
 * batch's tiles in it (their bounding rectangle, so the plan's edges cost no extra row or column), plus
 * `buffer` pixels on each side (not past the world's edge) that are rendered and cut away, so labels and
 * symbols near tile edges are drawn as in the neighbouring tiles.
 */
export function requestUnits(source: SourceConfig, tiles: TileAddress[]): RequestUnit[] {
  const T = source.tileSize;
  if (source.type !== 'wms' || !source.metatile) {
    return tiles.map((t, i) => ({ members: [i], url: tileUrl(source, t), width: T, height: T, meta: null }));
  }
  const [mc, mr] = source.metatile.size;
  const groups = new Map<string, number[]>();
  tiles.forEach((t, i) => {
    const k = `${t.z}/${Math.floor(t.x / mc)}/${Math.floor(t.y / mr)}`;
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  });
  return [...groups.values()].map((members) => {
    const ts = members.map((i) => tiles[i]!);
    const z = ts[0]!.z;
    // Tiles per row and column at this level: the buffer stops at the grid's edge.
    const { cols, rows } = source.grid ? gridLevelSize(source.grid, z, T) : { cols: 2 ** z, rows: 2 ** z };
    const [x0, x1] = [Math.min(...ts.map((t) => t.x)), Math.max(...ts.map((t) => t.x))];
    const [y0, y1] = [Math.min(...ts.map((t) => t.y)), Math.max(...ts.map((t) => t.y))];
    const b = source.metatile!.buffer;
    const left = Math.min(b, x0 * T);
    const right = Math.min(b, (cols - 1 - x1) * T);
    const top = Math.min(b, y0 * T);
    const bottom = Math.min(b, (rows - 1 - y1) * T);
    const nw = sourceTileBounds(source, { z, x: x0, y: y0 });
    const se = sourceTileBounds(source, { z, x: x1, y: y1 });
    const r = source.grid ? source.grid.resolutions[z]! : resolution(z, T);
    const bbox = {
      minX: nw.minX - left * r,
      maxX: se.maxX + right * r,
      maxY: nw.maxY + top * r,
      minY: se.minY - bottom * r,
    };
    const width = (x1 - x0 + 1) * T + left + right;
    const height = (y1 - y0 + 1) * T + top + bottom;
    return {
      members,
      url: getMapUrl(source, bbox, width, height),
      width,
      height,
      meta: { left, top, cells: ts.map((t) => [t.x - x0, t.y - y0] as [number, number]) },
    };
  });
}

/**
 * Cuts a validated metatile's decoded pixels into its members' tiles, each encoded in the source's format.
 * PNG at zlib level 1 without adaptive filtering, as tile seeders do (mapcache's "fast"): the encode is most of
 * a metatile's CPU, and the tile store is a cache, not the archive.
 */
export async function cutMetatile(
  pixels: DecodedPixels,
  meta: MetaCut,
  tileSize: number,
  format: string,
): Promise<Buffer[]> {
  const raw = { width: pixels.width, height: pixels.height, channels: pixels.channels };
  const f = format.toLowerCase();
  return Promise.all(
    meta.cells.map(([c, r]) => {
      const tile = sharp(pixels.data, { raw }).extract({
        left: meta.left + c * tileSize,
        top: meta.top + r * tileSize,
        width: tileSize,
        height: tileSize,
      });
      if (f.includes('jpeg') || f.includes('jpg')) return tile.jpeg({ quality: 90 }).toBuffer();
      if (f.includes('webp')) return tile.webp({ lossless: true }).toBuffer();
      return tile.png({ compressionLevel: 1, adaptiveFiltering: false }).toBuffer();
    }),
  );
}
