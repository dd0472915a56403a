/** What the stitcher (stitch.ts) is asked for, shared with the strip decoder (stitch-strips.ts). */
import type { Bounds3857 } from './georef';

/** A grid of tiles to stitch into one mosaic, and where and how to write it. */
export interface StitchInput {
  cols: number;
  rows: number;
  tileSize: number;
  /**
   * The tile file for grid cell (col,row) (row 0 at the top), or a tile-sized region of a larger image (a
   * chunk, decoded once per strip for all its cells), or null for a transparent cell.
   */
  tileAt(col: number, row: number): string | ChunkRegion | null;
  /** Path of the .tif to write. */
  output: string;
  /**
   * Reads a tile or chunk named by `tileAt` (tiles in a bucket); without it they are local files. A strip's
   * tiles are read while the strip before it is decoded, so two strips' encoded tiles at most are held, and
   * nothing is copied to disk.
   */
  read?: (ref: string) => Promise<Buffer>;
  /**
   * Local tiles and chunks (no `read`) are read only as regular files inside this folder after symlinks, at the
   * moment each is read (`readConfinedFile`); without it, each only inside its own folder. A file swapped for a
   * symlink since the caller checked it fails the stitch with a StoreEscapeError, never drawn.
   */
  storeRoot?: string;
  /** Also write <output minus .tif>.png / .webp, same pixels. */
  extraFormats: ('png' | 'webp')[];
  /**
   * Sidecars (aux.xml, world file, prj) beside the .tif too. Default true. The .tif carries its georeferencing
   * inside; the PNG/WebP copies have no other, so they get theirs either way.
   */
  sidecars?: boolean;
  bounds: Bounds3857;
  /** Rows of tiles joined per strip (bounds memory). Default so that a strip is at most ~64 MiB RGBA. */
  stripRows?: number;
  /**
   * Called with the tile rows done after each strip, and repeated every few seconds with the last count
   * (the final encode has no progress of its own), so activity heartbeats keep flowing.
   */
  onProgress?: (rowsDone: number) => void;
}

/** A tile-sized region of a larger image (a chunk of a mosaic fetched without a tile cache). */
export interface ChunkRegion {
  file: string;
  left: number;
  top: number;
}

/**
 * A problem with the input that a retry cannot fix (a tile of the wrong size, a mosaic too large for WebP):
 * the assembly activity can make it non-retryable by its name.
 */
export class StitchInputError extends Error {
  override readonly name = 'StitchInputError';
}
