import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import Database from 'better-sqlite3';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { SeedRequest, SeedResult } from '../../src/messages/seed-types';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

// A seed over zoom levels into MBTiles, on a real Temporal dev server and the demo tile server over HTTP.

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-seed-'));
const taskQueue = uniqueTaskQueue('seed');
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let server: DemoTileServer;
let sources: string;

before(async () => {
  env = await devServerEnv(ALL_SEARCH_ATTRIBUTES);
  worker = await createWorker({ connection: env.nativeConnection, client: env.client, namespace: 'default', taskQueue, roots: TEST_ROOTS });
  running = worker.run();
  server = await startDemoTileServer({ latencyMs: 1 });
  sources = path.join(dir, 'sources.yaml');
  writeFileSync(sources, `sources:\n  demo:\n    type: xyz\n    url: ${server.template}\n    concurrency: 4\n`);
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const seed = (extra: Partial<SeedRequest>, id: string): Promise<SeedResult> =>
  env.client.workflow.execute('seedWorkflow', {
    taskQueue,
    workflowId: `seed-${id}-${process.pid}`,
    args: [{ sourcesFile: sources, sourceName: 'demo', bbox: [5.7, 44.0, 6.5, 44.6], levels: [3, 5], into: path.join(dir, 'alps.mbtiles'), ...extra }],
  });

test('levels 3-5 into MBTiles: every served tile once, rows counted from the south, the metadata GDAL reads; a manifest per level and no image', async () => {
  const result = await seed({}, 'alps');
  assert.equal(result.levels.length, 3);
  const into = path.join(dir, 'alps.mbtiles');
  assert.equal(result.into, into);
  const db = new Database(into, { readonly: true });
  try {
    assert.equal(db.pragma('application_id', { simple: true }), 0x4d504258);
    const meta = Object.fromEntries((db.prepare('SELECT name, value FROM metadata').all() as { name: string; value: string }[]).map((r) => [r.name, r.value]));
    assert.deepEqual([meta.name, meta.format, meta.minzoom, meta.maxzoom, meta.type], ['demo', 'png', '3', '5', 'baselayer']);
    // The deepest level's grid (one z5 tile, 11.25 degrees wide), which every level covers: not the z3 grid's.
    const [w, s, e, n] = meta.bounds!.split(',').map(Number);
    assert.ok(w! <= 5.7 && s! <= 44.0 && e! >= 6.5 && n! >= 44.6, meta.bounds);
    assert.ok(Math.abs(e! - w! - 360 / 2 ** 5) < 1e-9, meta.bounds);
    let packed = 0;
    for (const level of result.levels) {
      const manifest = readManifest(level) as ReturnType<typeof readManifest> & { grid: { z: number }; image: string };
      const z = manifest.grid.z;
      assert.equal(manifest.counts.ok, manifest.total, `z${z}: ${JSON.stringify(manifest.counts)}`);
      assert.equal(manifest.image, 'not requested');
      assert.equal(existsSync(level.output), false, `z${z}: no image`);
      const rows = db.prepare('SELECT tile_column x, tile_row r, tile_data d FROM tiles WHERE zoom_level = ?').all(z) as { x: number; r: number; d: Buffer }[];
      assert.equal(rows.length, manifest.total, `z${z}: one row per tile`);
      packed += rows.length;
      // Each tile is the stored file's bytes, at its TMS row.
      for (const t of manifest.tiles) {
        const row = rows.find((x) => x.x === t.x && x.r === 2 ** z - 1 - t.y);
        assert.ok(row, `z${z} ${t.x}/${t.y} packed at its TMS row`);
        assert.ok(row.d.equals(readFileSync(t.path!)), `z${z} ${t.x}/${t.y}: the stored tile's bytes`);
      }
    }
    assert.equal(result.tiles, packed);
  } finally {
    db.close();
  }
  // GDAL's MBTiles driver opens it: EPSG:3857, the deepest level at full size, the others as overviews.
  const info = spawnSync('gdalinfo', ['-json', into], { encoding: 'utf8' });
  if (info.error) return;
  assert.equal(info.status, 0, info.stderr);
  const doc = JSON.parse(info.stdout) as { driverShortName: string; stac?: { 'proj:epsg'?: number }; bands: { overviews?: unknown[] }[] };
  assert.equal(doc.driverShortName, 'MBTiles');
  assert.equal(doc.stac?.['proj:epsg'], 3857);
  assert.ok((doc.bands[0]!.overviews ?? []).length >= 1, 'the lower levels are overviews');
});

test('bad seeds are refused before any level runs, naming the field and the value', async () => {
  const refused = async (extra: Partial<SeedRequest>, id: string, message: RegExp) => {
    await assert.rejects(seed(extra, id), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError, String(err));
      // The seed's own check fails the seed; a level's planning fails its child, the cause of the seed's failure.
      const chain: string[] = [];
      for (let e: unknown = err.cause; e instanceof Error; e = (e as { cause?: unknown }).cause) chain.push(e.message);
      assert.match(chain.join(' / '), message);
      return true;
    });
  };
  await refused({ levels: [5, 3] }, 'inverted', /^seed request: levels: the first level must not be after the last \(got \[5,3\]\)$/);
  await refused({ levels: [3, 31] }, 'deep', /levels: must be \[first, last\], whole zoom levels 0\.\.30 \(got \[3,31\]\)/);
  await refused({ into: path.join(dir, 'alps.sqlite') }, 'ext', /into: must be a local path ending in \.mbtiles/);
  await refused({ into: 's3://maps/alps.mbtiles' }, 's3', /into: must be a local path ending in \.mbtiles/);
  await refused({ directChunks: true } as Partial<SeedRequest>, 'chunks', /directChunks: a seed fetches tiles, not chunks \(got true\)/);
  // Outside the worker's output roots: the first level's planning refuses it, nothing is written.
  await refused({ into: '/srv/maps/alps.mbtiles' }, 'roots', /output: "\/srv\/maps\/alps\.z3\.tif" is outside this worker's roots/);
});

test('tilebreaker seed: one command over levels into MBTiles, a line per level and exit 0; a bad --levels is named before anything starts', async () => {
  const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
  const cli = (args: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) => {
      execFile(process.execPath, [main, ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue }, timeout: 120_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
      );
    });
  const into = path.join(dir, 'cli.mbtiles');
  const r = await cli(['seed', '--sources', sources, '--source', 'demo', '--bbox', '5.7,44.0,6.5,44.6', '--levels', '4-5', '--into', into]);
  assert.equal(r.code, 0, `${r.out}\n${r.err}`);
  const lines = r.out.trim().split('\n');
  assert.match(lines[0]!, new RegExp(`^seed ${into.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: \\d+ tiles packed$`));
  assert.deepEqual(
    lines.slice(1).map((l) => /\.z(\d+)\.manifest\.json: ok (\d+)\/(\d+),/.exec(l)?.slice(1, 2)[0]),
    ['4', '5'],
  );
  const db = new Database(into, { readonly: true });
  try {
    const n = (db.prepare('SELECT count(*) n FROM tiles').get() as { n: number }).n;
    assert.equal(`${n}`, /: (\d+) tiles packed/.exec(lines[0]!)![1]);
  } finally {
    db.close();
  }
  const bad = await cli(['seed', '--sources', sources, '--source', 'demo', '--bbox', '5.7,44.0,6.5,44.6', '--levels', '14-twelve', '--into', into]);
  assert.notEqual(bad.code, 0);
  assert.match(bad.err, /--levels: must be a zoom level or a range such as 10-14 \(got "14-twelve"\)/);
  // Every level is planned here first: a source not in the file, a deepest level over maxTiles, a source on a
  // grid MBTiles cannot hold, each refused (exit 2) before any level runs.
  const missing = await cli(['seed', '--sources', sources, '--source', 'nosuch', '--bbox', '5.7,44.0,6.5,44.6', '--levels', '4', '--into', path.join(dir, 'wrong.mbtiles')]);
  assert.equal(missing.code, 2, `${missing.out}\n${missing.err}`);
  assert.match(missing.err, /nosuch/);
  const large = await cli(['seed', '--sources', sources, '--source', 'demo', '--bbox', '5.7,44.0,6.5,44.6', '--levels', '4-9', '--max-tiles', '3', '--into', path.join(dir, 'large.mbtiles')]);
  assert.equal(large.code, 2, `${large.out}\n${large.err}`);
  assert.match(large.err, /maxTiles: the plan has \d+ tiles \(\d+ columns x \d+ rows at zoom 9\), more than maxTiles 3/);
  assert.equal(existsSync(path.join(dir, 'large.z4.manifest.json')), false, 'no level ran');
  const lv95 = path.join(dir, 'lv95.yaml');
  writeFileSync(
    lv95,
    JSON.stringify({
      sources: {
        lv95: { type: 'xyz', url: server.template, grid: { crs: 'EPSG:2056', origin: [2_420_000, 1_350_000], resolutions: [1000, 500], extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000] } },
      },
    }),
  );
  const projected = await cli(['seed', '--sources', lv95, '--source', 'lv95', '--bbox', '7.4,46.9,7.5,47', '--levels', '0-1', '--into', path.join(dir, 'lv95.mbtiles')]);
  assert.equal(projected.code, 2, `${projected.out}\n${projected.err}`);
  assert.match(projected.err, /--into: an MBTiles file holds Web Mercator tiles; the source "lv95" is on a grid in EPSG:2056/);
  // A level's configuration error found by the worker (the file on the workers only): exit 4, the field named.
  const wrong = await cli(['seed', '--sources', sources, '--sources-on-worker', '--source', 'nosuch', '--bbox', '5.7,44.0,6.5,44.6', '--levels', '4', '--into', path.join(dir, 'wrong.mbtiles')]);
  assert.equal(wrong.code, 4, `${wrong.out}\n${wrong.err}`);
  assert.match(wrong.err, /seed seed\/wrong-[0-9a-f]{8} failed: .*nosuch/);
});
