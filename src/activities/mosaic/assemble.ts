import { maskUrlSecrets } from '../../breaker/redact';
import {
  MANIFEST_STATUSES,
  zeroStatusCounts,
  type AssembleInput,
  type ManifestTile,
  type MosaicPlan,
  type MosaicResult,
  type StatusCounts,
} from '../../messages/mosaic-types';
import { openTileStore } from '../tile-store/open-store';
import { geoTransform, staleSidecars } from './georef';
import { latestRecords, readJournals } from './journal';
import { removeCheckpoints } from './batch-checkpoint';
import { gridCols, gridRows, outputBase, tileOf } from './plan';
import { coveredTiles } from './plan-coverage';
import { stitchMosaic, writeCoverageMask, type ChunkRegion } from './stitch';
import { confineTileFiles } from './tile-files';
import { activityContext } from '../activity-context';
import type { Context } from '@temporalio/activity';
import path from 'node:path';
import { isObjectUrl, locationWithin } from '../storage/location';
import { storageFor } from '../storage/storage';
import { confinePlan } from '../confine/plan-paths';
import type { WorkerRoots } from '../confine/roots';
import { mosaicFinish, type MosaicEnd } from '../metrics/mosaic-metrics';
import { publish, Scratch } from './scratch';

/** Mask values: what the coverage mask's pixel says about its tile (ok from the source, ok from a mirror, stale). */
const MASK = { ok: 255, mirror: 208, stale: 160 } as const;

/** Why a run that met a configuration error writes no image. */
export const NOT_WRITTEN_CONFIG_ERROR =
  'the run met a configuration error; an image written earlier at the output is left as it was';

/** A tile's mask value. */
const maskValue = (t: ManifestTile): number =>
  t.status === 'ok' && t.tier?.startsWith('mirror:')
    ? MASK.mirror
    : t.status === 'ok'
      ? MASK.ok
      : t.status === 'stale' || t.earlierCopyFetchedAt !== undefined
        ? MASK.stale
        : 0;

/** Gaps (dead letters, failures) looked up in the tile store at once. */
const EARLIER_AT_ONCE = 16;

/**
 * Marks each gap whose last good copy is in the plan's tile store with that copy (`path`,
 * `earlierCopyFetchedAt`), to be drawn as a stale tile is; returns how many.
 */
async function drawEarlierCopies(plan: MosaicPlan, tiles: ManifestTile[], beat: () => void): Promise<number> {
  const gaps = tiles.filter((t) => t.status === 'dead-lettered' || t.status === 'failed');
  if (gaps.length === 0) return 0;
  const store = openTileStore(plan.storeRoot);
  let found = 0;
  let next = 0;
  const worker = async () => {
    while (next < gaps.length) {
      const t = gaps[next++]!;
      // A copy the store cannot give (refused, unreadable) is a gap as before.
      const copy = await store.get(plan.sourceName, t).catch(() => null);
      if (copy) {
        t.path = copy.path;
        t.earlierCopyFetchedAt = new Date(copy.meta.fetchedAt).toISOString();
        found++;
      }
      if (next % 256 === 0) beat();
    }
  };
  await Promise.all(Array.from({ length: Math.min(EARLIER_AT_ONCE, gaps.length) }, worker));
  return found;
}

/** A tile no batch recorded: outside the coverage, or dead-lettered as not fetched (a re-drive picks it up). */
function unrecordedTile(plan: MosaicPlan, i: number, outside: boolean, input: AssembleInput): ManifestTile {
  return outside
    ? {
        i,
        ...tileOf(plan.grid, i),
        status: 'outside',
        reason: 'outside the coverage: not fetched',
        attempts: 0,
        pass: -1,
      }
    : {
        i,
        ...tileOf(plan.grid, i),
        status: 'dead-lettered',
        reason: input.partial
          ? `not fetched: the run stopped first (${input.stoppedBecause ?? 'stopped'})`
          : 'not fetched',
        attempts: 0,
        pass: -1,
      };
}

/** Every planned tile's latest record from the journals, or what a tile no batch recorded is. */
async function manifestTiles(plan: MosaicPlan, input: AssembleInput): Promise<ManifestTile[]> {
  const records = await confineTileFiles(
    latestRecords(await readJournals(plan.journalDir), plan.total),
    plan.storeRoot,
  );
  // A tile no batch reached that lies outside the coverage is outside, as its batch would have recorded it.
  const unrecorded = records.flatMap((r, i) => (r === null ? [i] : []));
  const covered = await coveredTiles(
    plan,
    plan.source.grid,
    unrecorded.map((i) => tileOf(plan.grid, i)),
  );
  const outside = new Set(unrecorded.filter((_, k) => !covered[k]));
  return records.map((r, i) => r ?? unrecordedTile(plan, i, outside.has(i), input));
}

/** Tiles by status, and served tiles by who served them. */
function tallyTiles(tiles: ManifestTile[]): { counts: StatusCounts; tiers: Record<string, number> } {
  const counts = zeroStatusCounts();
  const tiers: Record<string, number> = {};
  for (const t of tiles) {
    counts[t.status]++;
    if (t.tier) tiers[t.tier] = (tiers[t.tier] ?? 0) + 1;
  }
  return { counts, tiers };
}

/** What the manifest is made from. */
interface ManifestParts {
  input: AssembleInput;
  plan: MosaicPlan;
  tiles: ManifestTile[];
  counts: StatusCounts;
  tiers: Record<string, number>;
  configError: string | null;
  earlierCopies: number;
  /** The coverage mask's location. */
  mask: string;
}

/** The manifest as first written: its image still 'pending', its files not yet known. */
function newManifest({ input, plan, tiles, counts, tiers, configError, earlierCopies, mask }: ManifestParts) {
  const cols = gridCols(plan.grid);
  const rows = gridRows(plan.grid);
  const width = cols * plan.grid.tileSize;
  const height = rows * plan.grid.tileSize;
  return {
    version: 1,
    createdAt: new Date().toISOString(),
    workflowId: input.workflowId ?? null,
    partial: input.partial,
    stoppedBecause: input.stoppedBecause ?? null,
    configError,
    /** 'pending' while the image is being stitched, 'written' after, or why it could not be. */
    image: 'pending' as string,
    // The configured URL: credentials never live in it (they are added per request from the environment).
    source: { name: plan.sourceName, type: plan.source.type, url: maskUrlSecrets(plan.source.url) },
    crs: plan.bounds.crs ?? 'EPSG:3857',
    grid: { ...plan.grid, cols, rows },
    bounds: plan.bounds,
    width,
    height,
    geoTransform: geoTransform(plan.bounds, width, height),
    fallback: plan.fallback,
    afterDeadline: plan.afterDeadline,
    deadline: plan.deadlineAt === null ? null : new Date(plan.deadlineAt).toISOString(),
    total: plan.total,
    counts,
    /** Gaps drawn from their last good copy in the tile store (each tile says when it was fetched). */
    earlierCopies,
    /** Served tiles by who served them: `primary`, `mirror:<name>`, `stale`, `hole`. */
    tiers,
    /** The source's mirrors and their contracts as judged at planning (docs/sources.md). */
    mirrors: (plan.mirrors ?? []).map(({ name, usable, reason, agreement }) => ({
      name,
      usable,
      reason,
      ...(agreement ? { agreement } : {}),
    })),
    statuses: MANIFEST_STATUSES,
    mask: { file: mask, values: { ok: MASK.ok, mirror: MASK.mirror, stale: MASK.stale, other: 0 } },
    files: [] as string[],
    tiles,
  };
}

type Manifest = ReturnType<typeof newManifest>;

/** One assembly's outputs as they are written: the manifest, where it and the mask go, and the scratch folder. */
interface Assembly {
  plan: MosaicPlan;
  tiles: ManifestTile[];
  manifest: Manifest;
  manifestPath: string;
  mask: string;
  configError: string | null;
  /** Writes the manifest as it is now. */
  writeManifest: () => Promise<void>;
  /** Outputs in a bucket are made here and uploaded; null for local outputs, written in place. */
  scratch: Scratch | null;
  roots: WorkerRoots | undefined;
  ctx: Context | undefined;
}

/**
 * The assembly activity: the latest record of every planned tile from the journals, the stitched and
 * georeferenced mosaic, the coverage mask and the manifest. Every planned tile appears in the manifest: one
 * that no batch recorded (a run cancelled before reaching it) is dead-lettered as not fetched, so a re-drive
 * picks it up. Idempotent: a retry rewrites the same files.
 */
export async function assembleMosaic(
  input: AssembleInput,
  roots?: WorkerRoots,
  onEnd?: (end: MosaicEnd) => Promise<void>,
): Promise<MosaicResult> {
  const plan = await confinePlan(input.plan, roots, 'assembly');
  const ctx = activityContext();
  const tiles = await manifestTiles(plan, input);
  const { counts, tiers } = tallyTiles(tiles);
  // The source needs fixing, not a re-drive as it is: the result and the manifest say so first.
  const configError = tiles.find((t) => t.configError && t.status === 'failed')?.reason ?? null;
  // A gap the tile store still holds a good copy of is drawn from it, so a run that met a bad night never
  // draws less than the store had; the tile keeps its status (a re-drive fetches it again) and says so.
  const earlierCopies =
    plan.image === false || configError !== null || plan.directChunks
      ? 0
      : await drawEarlierCopies(plan, tiles, () => ctx?.heartbeat({ earlierCopies: 'looking' }));
  const base = outputBase(plan.output);
  const mask = `${base}.mask.png`;
  const manifestPath = `${base}.manifest.json`;
  const manifest = newManifest({ input, plan, tiles, counts, tiers, configError, earlierCopies, mask });
  const storage = storageFor(manifestPath);
  const writeManifest = () =>
    storage.write(manifestPath, Buffer.from(JSON.stringify(manifest, null, 1)), { contentType: 'application/json' });
  // Outputs in a bucket are made in a local scratch folder and uploaded; local ones are written in place.
  const scratch = isObjectUrl(plan.output) ? await Scratch.open() : null;
  try {
    await writeOutputs({ plan, tiles, manifest, manifestPath, mask, configError, writeManifest, scratch, roots, ctx });
  } finally {
    await scratch?.close();
  }
  // Once per run, at its end (a re-drive's assembly counts its own run): labelled by the output, which a
  // mosaic and its re-drives share.
  // A re-drive assembles under the first run's plan: that run's deadline is not the re-drive's.
  const deadlineAt = ctx?.info.workflowType === 'redriveMosaicWorkflow' ? null : plan.deadlineAt;
  await onEnd?.({
    mosaic: plan.output,
    manifest: manifestPath,
    result: mosaicFinish({ partial: input.partial, deadlineAt, now: Date.now(), tiles }),
    counts,
  });
  return {
    total: plan.total,
    counts,
    output: plan.output,
    files: manifest.files,
    manifest: manifestPath,
    mask,
    partial: input.partial,
    ...(configError !== null ? { configError } : {}),
    ...(earlierCopies > 0 ? { earlierCopies } : {}),
  };
}

/** The mask, the manifest and (unless none is asked for or due) the image, then the batch checkpoints tidied. */
async function writeOutputs(a: Assembly): Promise<void> {
  const { plan, manifest, manifestPath, mask, configError, scratch, ctx } = a;
  const cols = gridCols(plan.grid);
  const rows = gridRows(plan.grid);
  // The account of every tile goes first: whatever happens to the stitch, the manifest and mask exist.
  const maskFiles = await publish(
    scratch,
    await writeCoverageMask(
      scratch ? scratch.at(mask) : mask,
      cols,
      rows,
      (c, r) => maskValue(a.tiles[r * cols + c]!),
      plan.bounds,
    ),
    mask,
  );
  manifest.files = [...maskFiles, manifestPath];
  await a.writeManifest();
  // A seed level asks for the tiles alone: the store, the manifest and the mask are its outputs. A run that met
  // a configuration error served nothing worth publishing: an image at the output from an earlier run stays.
  const stitched = plan.image === false || configError !== null ? null : await stitchOrSay(a, maskFiles);
  manifest.image = stitched
    ? 'written'
    : configError !== null
      ? `not written: ${NOT_WRITTEN_CONFIG_ERROR}`
      : 'not requested';
  manifest.files = [...(stitched ?? []), ...maskFiles, manifestPath];
  await a.writeManifest();
  // Tidying only: the manifest and image are written, and a checkpoint left behind is never read as a journal.
  await removeCheckpoints(plan.journalDir).catch((err: unknown) => {
    ctx?.log.warn('batch checkpoints left in place', { error: (err as Error).message });
  });
}

/** The stitched image's files where they now are; if the stitch fails, the manifest says why before it throws. */
async function stitchOrSay(a: Assembly, maskFiles: string[]): Promise<string[]> {
  const { plan, manifest, scratch, ctx } = a;
  const cols = gridCols(plan.grid);
  try {
    const stitched = await stitchMosaic({
      cols,
      rows: gridRows(plan.grid),
      tileSize: plan.grid.tileSize,
      tileAt: (c, r) => stitchTile(a.tiles[r * cols + c]!, plan, a.roots),
      // Local tiles are confined again as they are read: one swapped for a symlink since the check fails the stitch (a retry records it failed).
      ...(isObjectUrl(plan.storeRoot) ? { read: readTile } : { storeRoot: plan.storeRoot }),
      output: scratch ? scratch.at(plan.output) : plan.output,
      extraFormats: plan.extraFormats,
      ...(plan.sidecars === false ? { sidecars: false } : {}),
      bounds: plan.bounds,
      onProgress: (done) => ctx?.heartbeat({ rowsDone: done }),
    });
    // Locally the stitcher removed them; in a bucket an earlier run's stay beside the output unless removed here,
    // before the new image goes up (the old image carries its own tags, so it loses nothing meanwhile).
    if (scratch && plan.sidecars === false)
      await storageFor(plan.output).remove(staleSidecars(plan.output, plan.extraFormats.length > 0));
    return await publish(scratch, stitched.files, plan.output);
  } catch (err) {
    manifest.image = `not written: ${(err as Error).message}`;
    manifest.files = [...maskFiles, a.manifestPath];
    await a.writeManifest();
    throw err;
  }
}

/** What the stitcher draws for a tile: its file (or its chunk's region), or null for a transparent cell. */
function stitchTile(t: ManifestTile, plan: MosaicPlan, roots: WorkerRoots | undefined): string | ChunkRegion | null {
  if ((t.status !== 'ok' && t.status !== 'stale' && t.earlierCopyFetchedAt === undefined) || !t.path) return null;
  // Only files of the plan's tile store are drawn, whatever a journal says.
  if (roots && !locationWithin(isObjectUrl(t.path) ? t.path : path.resolve(t.path), plan.storeRoot)) return null;
  return t.region ? { file: t.path, ...t.region } : t.path;
}

/** A tile of a store in a bucket, for the stitcher. */
async function readTile(ref: string): Promise<Buffer> {
  const body = await storageFor(ref).read(ref);
  if (body === null) throw new Error(`stitch: tile ${ref} is no longer in the tile store`);
  return body;
}
