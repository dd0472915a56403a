/**
 * bench:stitch: the assembly of a large mosaic whose tiles are in a bucket (a loopback S3 server): --tiles
 * (default 16,384, a 128 x 128 grid of 256 px tiles, 32,768 px a side) are put in an object tile store with
 * their journal and plan, then one assembly runs in a process of its own, reading the tiles from the bucket,
 * stitching in a scratch folder and uploading the GeoTIFF, mask and manifest. The same assembly from a local
 * tile store into a local output runs first, as the baseline. Prints both, then:
 *   stitch: tiles=<int> rss-mb=<int> scratch-peak-mb=<int> seconds=<float> local-rss-mb=<int> local-seconds=<float> store=s3
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Command } from 'commander';
import sharp from 'sharp';
import { writeJournal } from '../src/activities/mosaic/journal';
import { planMosaic, tileOf } from '../src/activities/mosaic/plan';
import { resetS3Client, s3Client } from '../src/activities/storage/s3-client';
import { ObjectTileStore } from '../src/activities/tile-store/object-tile-store';
import { TileStore } from '../src/activities/tile-store/tile-store';
import type { Tiles } from '../src/activities/tile-store/tiles';
import { packageRoot } from '../src/client/local-server';
import { startLocalS3 } from '../src/demo/s3-server';
import { tileBounds } from '../src/geo/mercator';
import type { ManifestTile, MosaicPlan } from '../src/messages/mosaic-types';

const run = promisify(execFile);

/** Bytes under `dir`, now (files only; a folder gone meanwhile counts 0). */
function usage(dir: string): number {
  let total = 0;
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      total += e.isDirectory()
        ? usage(p)
        : (() => {
            try {
              return statSync(p).size;
            } catch {
              return 0;
            }
          })();
    }
  } catch {
    return total;
  }
  return total;
}

/** Distinct tiles with some texture, so the TIFF compresses as map tiles do, not as a flat colour. */
async function tileImages(n: number): Promise<Buffer[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const px = Buffer.alloc(256 * 256 * 4);
      for (let i = 0; i < 256 * 256; i++) {
        const x = i % 256;
        const y = Math.floor(i / 256);
        px[i * 4] = (x * (k + 1)) & 255;
        px[i * 4 + 1] = (y * 3 + k * 17) & 255;
        px[i * 4 + 2] = ((x ^ y) + k * 29) & 255;
        px[i * 4 + 3] = 255;
      }
      return sharp(px, { raw: { width: 256, height: 256, channels: 4 } })
        .png()
        .toBuffer();
    }),
  );
}

async function fill(store: Tiles, plan: MosaicPlan, images: Buffer[]): Promise<void> {
  const tiles: ManifestTile[] = new Array<ManifestTile>(plan.total);
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < plan.total) {
        const i = next++;
        const t = tileOf(plan.grid, i);
        const { path: p } = await store.put('bench', t, images[i % images.length]!, {
          fetchedAt: Date.now(),
          contentType: 'image/png',
          width: 256,
          height: 256,
        });
        tiles[i] = { i, ...t, status: 'ok', reason: 'fetched', attempts: 1, pass: 0, path: p };
      }
    }),
  );
  await writeJournal(plan.journalDir, { batchId: 'p0-all', pass: 0, writtenAt: Date.now(), tiles });
}

async function assemble(
  plan: MosaicPlan,
  work: string,
  scratch: string,
  env: Record<string, string>,
): Promise<{ seconds: number; maxRssMb: number; scratchPeakMb: number }> {
  const planFile = path.join(work, `plan-${Date.now()}.json`);
  writeFileSync(planFile, JSON.stringify(plan));
  let peak = 0;
  const timer = setInterval(() => (peak = Math.max(peak, usage(scratch))), 250);
  try {
    const { stdout } = await run(process.execPath, [path.join(__dirname, 'stitch', 'assemble-child.js'), planFile], {
      env: { ...process.env, ...env, TILEBREAKER_SCRATCH_DIR: scratch },
      maxBuffer: 1 << 20,
    });
    const out = JSON.parse(stdout.trim().split('\n').pop()!) as { seconds: number; maxRssMb: number; ok: number };
    if (out.ok !== plan.total) throw new Error(`bench:stitch: the assembly drew ${out.ok}/${plan.total} tiles`);
    return { seconds: out.seconds, maxRssMb: out.maxRssMb, scratchPeakMb: peak / 2 ** 20 };
  } finally {
    clearInterval(timer);
  }
}

async function main(o: { tiles: string }): Promise<void> {
  const tiles = Number(o.tiles);
  const side = Math.sqrt(tiles);
  if (!Number.isInteger(side) || side < 2)
    throw new Error(`bench:stitch: --tiles must be a square number of at least 4 (got ${JSON.stringify(o.tiles)})`);
  const z = 12;
  const [x0, y0] = [2000, 1300];
  const nw = tileBounds(z, x0, y0);
  const se = tileBounds(z, x0 + side - 1, y0 + side - 1);
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-stitch-'));
  const scratch = path.join(work, 'scratch');
  mkdirSync(scratch);
  const s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(work, 's3'), bucket: 'bench' });
  try {
    Object.assign(process.env, s3.env);
    resetS3Client();
    const request = (output: string) => ({
      source: { type: 'xyz' as const, url: 'http://127.0.0.1:9/{z}/{x}/{y}.png' },
      sourceName: 'bench',
      bbox: [nw.minX, se.minY, se.maxX, nw.maxY] as [number, number, number, number],
      crs: 'EPSG:3857' as const,
      zoom: z,
      output,
      maxTiles: tiles,
    });
    console.log(
      `bench:stitch: ${side} x ${side} = ${tiles} tiles of 256 px (${side * 256} px a side); S3: Versity S3 Gateway on ${s3.endpoint}`,
    );
    const images = await tileImages(64);
    const localPlan = await planMosaic(request(path.join(work, 'local', 'mosaic.tif')));
    let t0 = performance.now();
    await fill(new TileStore(localPlan.storeRoot), localPlan, images);
    console.log(`  local tile store filled in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const local = await assemble(localPlan, work, scratch, {});
    console.log(`  local -> local: ${local.seconds.toFixed(1)} s, peak RSS ${Math.round(local.maxRssMb)} MB`);
    rmSync(path.join(work, 'local'), { recursive: true, force: true });

    const s3Plan = await planMosaic(request('s3://bench/big/mosaic.tif'));
    t0 = performance.now();
    await fill(new ObjectTileStore(s3Plan.storeRoot, s3Client()), s3Plan, images);
    console.log(`  bucket tile store filled in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const remote = await assemble(s3Plan, work, scratch, s3.env);
    console.log(
      `  bucket -> bucket: ${remote.seconds.toFixed(1)} s, peak RSS ${Math.round(remote.maxRssMb)} MB, scratch folder peak ${Math.round(remote.scratchPeakMb)} MB`,
    );
    console.log(`targets: peak RSS at most 1536 MB: ${remote.maxRssMb <= 1536 ? 'met' : 'MISSED'}`);
    console.log(
      `stitch: tiles=${tiles} rss-mb=${Math.round(remote.maxRssMb)} scratch-peak-mb=${Math.round(remote.scratchPeakMb)} seconds=${remote.seconds.toFixed(1)} local-rss-mb=${Math.round(local.maxRssMb)} local-seconds=${local.seconds.toFixed(1)} store=s3`,
    );
  } finally {
    await s3.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

new Command('bench:stitch')
  .option('--tiles <n>', 'tiles of the square mosaic (default 16384)', '16384')
  .action((o: { tiles: string }) => main(o))
  .parseAsync()
  .catch((err: unknown) => {
    console.error(err instanceof Error && err.message.startsWith('bench:stitch:') ? err.message : err);
    process.exit(1);
  });
