/**
 * The seed's last activity: every level's served tiles (ok, stale, or from a mirror), taken from that level's
 * journals in the tile store it filled, packed into one MBTiles file. Each level's plan is read from its work
 * folder and confined like a re-drive's, and a tile file is packed only if it lies in the plan's tile store:
 * a forged input cannot pack a worker's files or write outside the output roots.
 */
import { lstat, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../breaker/config-error';
import { metersToLonLat } from '../../geo/mercator';
import type { MosaicPlan } from '../../messages/mosaic-types';
import type { PackMbtilesInput, PackMbtilesResult } from '../../messages/seed-types';
import type { Context } from '@temporalio/activity';
import { activityContext } from '../activity-context';
import { confineLocation } from '../confine/confine-location';
import type { WorkerRoots } from '../confine/roots';
import { loadDeadLetters } from '../mosaic/dead-letters';
import { latestRecords, readJournals } from '../mosaic/journal';
import { tileOf } from '../mosaic/plan';
import { confineTileFiles } from '../mosaic/tile-files';
import { SCRATCH_DIR_ENV } from '../mosaic/scratch';
import { isObjectUrl, locationWithin } from '../storage/location';
import { storageFor } from '../storage/storage';
import { readConfinedFile, StoreEscapeError } from '../tile-store/store-bounds';
import { writeMbtiles, type MbtilesFormat, type MbtilesMeta, type MbtilesTile, type MbtilesWritten } from './mbtiles';

/** Tile files read ahead of the inserts. */
const READ_AHEAD = 16;

const FORMATS: Record<string, MbtilesFormat> = { '.png': 'png', '.jpg': 'jpg', '.jpeg': 'jpg', '.webp': 'webp' };

/** A level to pack: its plan, and each planned tile's file when it was served from the plan's tile store. */
interface PackLevel {
  plan: MosaicPlan;
  files: (string | null)[];
}

export async function packMbtiles(input: PackMbtilesInput, roots?: WorkerRoots): Promise<PackMbtilesResult> {
  if (!/\.mbtiles$/i.test(input.into))
    throw new ConfigError('seed', [
      `into: must be a path or an s3:// URL ending in .mbtiles (got ${JSON.stringify(input.into)})`,
    ]);
  const bucket = isObjectUrl(input.into);
  const into = roots
    ? await confineLocation(input.into, roots, 'into', 'seed')
    : bucket
      ? input.into
      : path.resolve(input.into);
  const ctx = activityContext();
  const levels = await readLevels(input.outputs, roots);
  const meta = packMeta(input.name, levels);
  const tiles = new LevelTiles(levels);
  // SQLite needs a file: into a bucket, the database is built in a folder of its own, then uploaded whole.
  const scratch = bucket
    ? await mkdtemp(path.join(process.env[SCRATCH_DIR_ENV] || tmpdir(), 'tilebreaker-pack-'))
    : null;
  let out: MbtilesWritten;
  try {
    out = await writePack({ into, scratch, meta, tiles, ctx });
  } finally {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  }
  return {
    into,
    tiles: out.written + out.kept,
    kept: out.kept,
    ...(out.earlierNotKept !== undefined ? { earlierNotKept: out.earlierNotKept } : {}),
    missing: tiles.missing,
    levels: levels.map((l) => ({
      zoom: l.plan.grid.z,
      tiles: l.files.filter((f) => f !== null).length,
      total: l.plan.total,
    })),
  };
}

/** Every level's served tile files, refused when there is none or a level is not on the Web Mercator grid. */
async function readLevels(outputs: string[], roots: WorkerRoots | undefined): Promise<PackLevel[]> {
  const levels: PackLevel[] = [];
  for (const output of new Set(outputs)) {
    // The plan beside the level's journals, checked and confined as a re-drive's is.
    const { plan } = await loadDeadLetters(output, undefined, roots);
    const records = await confineTileFiles(
      latestRecords(await readJournals(plan.journalDir ?? plan.workDir), plan.total),
      plan.storeRoot,
    );
    const inStore = (p: string) => locationWithin(isObjectUrl(p) ? p : path.resolve(p), plan.storeRoot);
    levels.push({
      plan,
      files: records.map((r) =>
        r && (r.status === 'ok' || r.status === 'stale') && r.path && !r.region && inStore(r.path) ? r.path : null,
      ),
    });
  }
  if (levels.length === 0) throw new ConfigError('seed', ['outputs: no level to pack']);
  const projected = levels.find((l) => l.plan.bounds.crs !== undefined);
  // MBTiles is the Web Mercator XYZ grid's container; a seed on another grid keeps its levels' tile stores.
  if (projected)
    throw new ConfigError('seed', [
      `into: an MBTiles file holds Web Mercator tiles; the source's grid is in ${projected.plan.bounds.crs}`,
    ]);
  return levels;
}

/** The file's metadata: its name, its tiles' format, the deepest level's bounds in degrees, the zoom range. */
function packMeta(name: string, levels: PackLevel[]): MbtilesMeta {
  // The tiles' format, from the first served tile of any level (MBTiles names one for the whole file).
  const first = levels.flatMap((l) => l.files).find((f) => f !== null);
  const format = FORMATS[path.extname(first ?? '.png').toLowerCase()] ?? 'png';
  const zooms = levels.map((l) => l.plan.grid.z);
  // The deepest level's grid, in degrees: covered by every level, as the specification asks of bounds.
  const deepest = levels.reduce((a, b) => (b.plan.grid.z > a.plan.grid.z ? b : a)).plan.bounds;
  const [w, s] = metersToLonLat(deepest.minX, deepest.minY);
  const [e, n] = metersToLonLat(deepest.maxX, deepest.maxY);
  return {
    name,
    format,
    bounds: [w, s, e, n] as [number, number, number, number],
    minzoom: Math.min(...zooms),
    maxzoom: Math.max(...zooms),
  };
}

/** A tile being read ahead of the inserts (null: gone or swapped, not packed). */
interface ReadAhead {
  z: number;
  x: number;
  y: number;
  data: Promise<Buffer | null>;
}

/** The levels' served tiles in order, read a few ahead; a tile gone or swapped since is counted in `missing`. */
class LevelTiles {
  /** Tiles not packed: gone since their level ended, or swapped for a symlink. */
  missing = 0;

  constructor(private readonly levels: PackLevel[]) {}

  async *tiles(): AsyncGenerator<MbtilesTile> {
    // A few reads ahead of the inserts, so the disk (or the bucket) and SQLite work at the same time.
    const ahead: ReadAhead[] = [];
    for (const { plan, files } of this.levels) {
      for (let i = 0; i < files.length; i++) {
        const f = files[i];
        if (!f) continue;
        const data = this.read(f);
        data.catch(() => undefined); // awaited in order below; this only keeps an early rejection from going unhandled
        ahead.push({ ...tileOf(plan.grid, i), data });
        yield* this.take(ahead, READ_AHEAD);
      }
    }
    yield* this.take(ahead, 0);
  }

  /** The tiles read ahead, oldest first, until `limit` are left; one that could not be read is counted missing. */
  private async *take(ahead: ReadAhead[], limit: number): AsyncGenerator<MbtilesTile> {
    while (ahead.length > limit) {
      const t = ahead.shift()!;
      const data = await t.data;
      if (data) yield { z: t.z, x: t.x, y: t.y, data };
      else this.missing++;
    }
  }

  private async read(f: string): Promise<Buffer | null> {
    try {
      // Checked when its level was read, and again as it is read: a tile or folder swapped for a symlink since is not followed.
      if (isObjectUrl(f)) return await storageFor(f).read(f);
      // The level's store (every file kept lies in one, as written).
      const store = this.levels.find((l) => locationWithin(path.resolve(f), l.plan.storeRoot))!.plan.storeRoot;
      return await readConfinedFile(f, store);
    } catch (err) {
      // Gone since its level ended (the store rewrote it under another extension), or swapped: counted, not packed.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && !(err instanceof StoreEscapeError)) throw err;
      return null;
    }
  }
}

/** Where and what to write. */
interface PackWrite {
  into: string;
  /** A folder of its own to build the file in, for a file bound for a bucket; null to write at `into`. */
  scratch: string | null;
  meta: MbtilesMeta;
  tiles: LevelTiles;
  ctx: Context | undefined;
}

/** Writes the MBTiles file (keeping the earlier file's tiles this run does not serve) and, for a bucket, uploads it. */
async function writePack({ into, scratch, meta, tiles, ctx }: PackWrite): Promise<MbtilesWritten> {
  const file = scratch ? path.join(scratch, 'tiles.mbtiles') : into;
  // The file this one replaces: every tile of it that this run does not serve again is kept.
  const earlier = scratch
    ? (await storageFor(into).download(into, path.join(scratch, 'earlier.mbtiles')))
      ? path.join(scratch, 'earlier.mbtiles')
      : undefined
    : await earlierFile(into);
  const out = await writeMbtiles({
    file,
    meta,
    tiles: tiles.tiles(),
    onChunk: (n) => ctx?.heartbeat({ written: n }),
    earlier,
  });
  if (scratch) {
    // Heartbeats as the parts go: a large file's upload outlasts the heartbeat timeout, a stalled one does not.
    const sent = (bytes: number) => ctx?.heartbeat({ written: out.written + out.kept, uploaded: bytes });
    await storageFor(into).upload(file, into, {
      contentType: 'application/vnd.sqlite3',
      onProgress: sent,
      ...(ctx ? { signal: ctx.cancellationSignal } : {}),
    });
  }
  return out;
}

/** The local file being replaced, when it is one (a link planted at the name is neither read nor kept). */
async function earlierFile(into: string): Promise<string | undefined> {
  try {
    return (await lstat(into)).isFile() ? into : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
