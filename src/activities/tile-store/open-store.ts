import { isObjectUrl } from '../storage/location';
import { s3Client } from '../storage/s3-client';
import { ObjectTileStore } from './object-tile-store';
import { TileStore } from './tile-store';
import type { Tiles } from './tiles';

/** The tile store at `root`: a folder, or a bucket prefix (`s3://bucket/prefix`). */
export function openTileStore(root: string): Tiles {
  return isObjectUrl(root) ? new ObjectTileStore(root, s3Client()) : new TileStore(root);
}
