import path from 'node:path';
import type { Client } from '@temporalio/client';
import sharp from 'sharp';
import type { WorkerRoots } from '../activities/confine/roots';
import { ConfigError } from '../breaker/config-error';
import { confineLocation } from '../activities/confine/confine-location';
import { isObjectUrl } from '../activities/storage/location';
import { storageFor, type Storage } from '../activities/storage/storage';
import { liveCounts, mosaicStatus } from '../client/mosaics';
import { listed, listMosaics, type ListedMosaic } from '../client/mosaic-names';
import type { ManifestTile, StatusCounts } from '../messages/mosaic-types';

export interface PageMosaic {
  name: string;
  workflowId: string;
  status: string;
  progress: number | null;
  source: string | null;
  zoom: number | null;
  startTime: string;
  closeTime: string | null;
}

export interface PageMosaicDetail extends PageMosaic {
  phase: string | null;
  total: number | null;
  done: number | null;
  counts: StatusCounts | null;
  waitingFor: { key: string; state: string; deadlineAt: number | null } | null;
  failure: string | null;
  /** Present once the manifest is written and readable here: the grid and each tile's status, in grid order. */
  map: PageMap | null;
  /** Why there is no map (not assembled yet, the manifest outside this console's roots, ...). */
  noMap: string | null;
}

export interface PageMap {
  cols: number;
  rows: number;
  tileSize: number;
  width: number;
  height: number;
  /** Each tile's status, row by row from the top: one short code per tile (see STATUS_CODES). */
  statuses: string;
  /** Tiles served by someone other than the source (mirror:<name>, stale), by index. */
  tiers: Record<number, string>;
  preview: boolean;
}

function pageMosaic(m: ListedMosaic): PageMosaic {
  const { name, workflowId, status, progress, source, zoom, startTime, closeTime } = m;
  return { name, workflowId, status, progress, source, zoom, startTime, closeTime };
}

/** One letter per status, so a 100,000-tile map is 100 KB, not a record per tile. */
export const STATUS_CODES: Record<string, string> = {
  ok: 'o',
  stale: 's',
  hole: 'h',
  'dead-lettered': 'd',
  failed: 'f',
  outside: 'x',
};

/** The mosaic's tile record as the page shows it on a click: no stored path, no source URL. */
export type PageTile = Omit<ManifestTile, 'path' | 'region'>;

/** Manifests above this size are not read: the console is for looking, not for loading a city's worth of JSON. */
const MAX_MANIFEST_BYTES = 256 * 1024 ** 2;

interface Manifest {
  grid: { cols: number; rows: number; tileSize: number };
  width: number;
  height: number;
  files: string[];
  tiles: ManifestTile[];
}

/**
 * What the console reads from a worker's outputs: manifests and mosaic images, only under the roots it was
 * given (the worker's, from the same environment), cached by location.
 */
export class MosaicsView {
  private readonly manifests = new Map<string, Promise<Manifest>>();
  private readonly previews = new Map<string, Promise<Buffer>>();
  private readonly storage: (loc: string) => Storage;
  private readonly maxImageBytes: number;

  constructor(
    private readonly client: Client,
    private readonly roots: WorkerRoots,
    opts: { storage?: (loc: string) => Storage; maxImageBytes?: number } = {},
  ) {
    this.storage = opts.storage ?? storageFor;
    this.maxImageBytes = opts.maxImageBytes ?? MAX_IMAGE_BYTES;
  }

  async list(): Promise<PageMosaic[]> {
    return (await listMosaics(this.client, { limit: 200 })).mosaics.map(pageMosaic);
  }

  async detail(workflowId: string): Promise<PageMosaicDetail> {
    // Its own description, as a list entry reads it: not the whole list again for one mosaic.
    const d = await this.client.workflow.getHandle(workflowId).describe();
    const base = pageMosaic(listed({ ...d, raw: d.raw.workflowExecutionInfo ?? {} }));
    const s = await mosaicStatus(this.client, workflowId);
    const live = liveCounts(s);
    const detail: PageMosaicDetail = {
      ...base,
      phase: live?.phase ?? null,
      total: s.result?.total ?? live?.total ?? null,
      done: s.result ? s.result.total : (live?.done ?? null),
      counts: s.result?.counts ?? live?.counts ?? null,
      waitingFor: live?.waitingFor ?? null,
      failure: s.failure,
      map: null,
      noMap:
        s.status === 'RUNNING'
          ? 'the map appears when the mosaic is assembled'
          : 'no manifest: the mosaic ended before it wrote one',
    };
    if (!s.result) return detail;
    try {
      const m = await this.manifest(s.result.manifest);
      const statuses = m.tiles.map((t) => STATUS_CODES[t.status] ?? '?').join('');
      const tiers: Record<number, string> = {};
      for (const t of m.tiles) if (t.tier && t.tier !== 'primary' && t.tier !== 'hole') tiers[t.i] = t.tier;
      detail.map = {
        cols: m.grid.cols,
        rows: m.grid.rows,
        tileSize: m.grid.tileSize,
        width: m.width,
        height: m.height,
        statuses,
        tiers,
        preview: previewSource(m) !== null,
      };
      detail.noMap = null;
    } catch (err) {
      detail.noMap =
        err instanceof ConfigError
          ? "its manifest is outside this console's roots (TILEBREAKER_OUTPUT_DIR, TILEBREAKER_OUTPUT_BUCKETS)"
          : err instanceof NotFound
            ? err.message
            : `its manifest could not be read here${(err as NodeJS.ErrnoException).code ? ` (${(err as NodeJS.ErrnoException).code})` : ''}`;
    }
    return detail;
  }

  async tile(workflowId: string, index: number): Promise<PageTile> {
    const m = await this.manifestOf(workflowId);
    const t = m.tiles[index];
    if (!t) throw new NotFound(`tile ${index}: the mosaic has ${m.tiles.length} tiles`);
    const { path: _path, region: _region, ...shown } = t;
    return shown;
  }

  /** A PNG of the mosaic at most `maxPx` on its longer side, from its PNG or its TIFF. */
  async preview(workflowId: string, maxPx = 2048): Promise<Buffer> {
    const m = await this.manifestOf(workflowId);
    const file = previewSource(m);
    if (!file) throw new NotFound('the mosaic has no image (a manifest-only run, or its image could not be written)');
    const confined = await confineLocation(file, this.roots, 'output', 'the console');
    // Keyed by what the file is now: a re-drive rewrites the same output.
    const version = await this.versionOf(confined, this.maxImageBytes);
    return shared(this.previews, `${confined}\n${version}`, async () => {
      const input = isObjectUrl(confined) ? await this.bytes(confined, this.maxImageBytes) : confined;
      return sharp(input, { limitInputPixels: MAX_IMAGE_PIXELS })
        .resize({ width: maxPx, height: maxPx, fit: 'inside', withoutEnlargement: true })
        .png()
        .toBuffer();
    });
  }

  private async manifestOf(workflowId: string): Promise<Manifest> {
    const s = await mosaicStatus(this.client, workflowId);
    if (!s.result) throw new NotFound(`mosaic ${workflowId} has no manifest yet (${s.status.toLowerCase()})`);
    return this.manifest(s.result.manifest);
  }

  private async manifest(loc: string): Promise<Manifest> {
    // The location comes from a workflow's result: read it only where the worker may write.
    const confined = await confineLocation(loc, this.roots, 'manifest', 'the console');
    const version = await this.versionOf(confined, MAX_MANIFEST_BYTES);
    return shared(this.manifests, `${confined}\n${version}`, async () =>
      parseManifest(await this.bytes(confined, MAX_MANIFEST_BYTES), path.basename(confined)),
    );
  }

  private async bytes(loc: string, max: number): Promise<Buffer> {
    const bytes = await this.storage(loc).read(loc);
    if (!bytes) throw new NotFound(`${path.basename(loc)}: not there (moved or deleted)`);
    // Replaced by a larger one since its size was read.
    if (bytes.length > max) throw tooLarge(loc, bytes.length, max);
    return bytes;
  }

  /**
   * What the file is now (a local file's size and modification time, an object's ETag and Last-Modified), read
   * without reading the file: one too large is refused before any of it is read.
   */
  private async versionOf(loc: string, max: number): Promise<string> {
    const st = await this.storage(loc).stat(loc);
    if (!st) throw new NotFound(`${path.basename(loc)}: not there (moved or deleted)`);
    if (st.size > max) throw tooLarge(loc, st.size, max);
    return st.version;
  }
}

const tooLarge = (loc: string, size: number, max: number) =>
  new Error(`${path.basename(loc)} is ${size} bytes, more than the console reads (${max})`);

/** Images above these are not previewed: the console is for looking, not for loading a city's worth of pixels. */
const MAX_IMAGE_BYTES = 2 * 1024 ** 3;
const MAX_IMAGE_PIXELS = 1024 ** 3;
/** The few results kept, each under the key of what its file was. */
const CACHED = 4;

/** One computation per key, shared by everyone asking meanwhile; the last CACHED results kept; a failure not kept. */
function shared<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  const hit = cache.get(key);
  if (hit) return hit;
  const p = make();
  cache.set(key, p);
  p.catch(() => cache.delete(key));
  while (cache.size > CACHED) cache.delete(cache.keys().next().value!);
  return p;
}

export class NotFound extends Error {}

/** A manifest's fields the console uses, checked; the error names the file, never its content. */
function parseManifest(bytes: Buffer, name: string): Manifest {
  let m: unknown;
  try {
    m = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new Error(`${name}: not a JSON manifest`);
  }
  const o = m as Partial<Manifest> | null;
  const ok =
    o !== null &&
    typeof o === 'object' &&
    Array.isArray(o.tiles) &&
    Array.isArray(o.files) &&
    typeof o.grid?.cols === 'number' &&
    typeof o.grid.rows === 'number' &&
    typeof o.width === 'number' &&
    typeof o.height === 'number' &&
    o.tiles.length === o.grid.cols * o.grid.rows;
  if (!ok) throw new Error(`${name}: not a mosaic manifest`);
  return o as Manifest;
}

/** The mosaic's PNG when it has one (cheaper to read), else its TIFF. */
function previewSource(m: Manifest): string | null {
  return (
    m.files.find((f) => f.endsWith('.png') && !f.endsWith('.mask.png')) ??
    m.files.find((f) => f.endsWith('.tif')) ??
    null
  );
}
