import path from 'node:path';
import type { ManifestTile } from '../../messages/mosaic-types';
import { within } from '../confine/confine';
import { isObjectUrl } from '../storage/location';
import { StoreBounds, StoreEscapeError } from '../tile-store/store-bounds';

/**
 * The records with every tile file the stitch would read checked against the tile store after symlinks: a
 * record whose file is a symlink, or lies in a folder linked out of the store, ends `failed` with the refusal
 * (so the manifest still accounts for it) and its file is never read. Files outside the store as written are
 * left to the caller. One realpath per folder and one lstat per tile.
 */
export async function confineTileFiles(
  records: (ManifestTile | null)[],
  storeRoot: string,
): Promise<(ManifestTile | null)[]> {
  const bounds = new StoreBounds(storeRoot);
  const out = [...records];
  for (let i = 0; i < out.length; i++) {
    const t = out[i];
    // A bucket has no symlinks: only local files are checked.
    if (
      !t?.path ||
      (t.status !== 'ok' && t.status !== 'stale') ||
      isObjectUrl(t.path) ||
      isObjectUrl(storeRoot) ||
      !within(path.resolve(t.path), storeRoot)
    )
      continue;
    try {
      await bounds.checkDir(path.dirname(path.resolve(t.path)));
      await bounds.lstatFile(path.resolve(t.path));
    } catch (err) {
      if (!(err instanceof StoreEscapeError)) throw err;
      const { path: _path, region: _region, ...rest } = t;
      out[i] = { ...rest, status: 'failed', kind: 'permanent', reason: err.message };
    }
  }
  return out;
}
