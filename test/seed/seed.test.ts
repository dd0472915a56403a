import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import Database from 'better-sqlite3';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { openTileStore } from '../../src/activities/tile-store/open-store';
import { parseMosaicRequest } from '../../src/messages/mosaic-request';
import { startRedrive } from '../../src/client/mosaics';
import { seedExitCode, seedWorkflowId, startSeed } from '../../src/client/seeds';
import type { ScheduledSeedResult } from '../../src/workflows/scheduled-seed';
import type { MosaicResult } from '../../src/messages/mosaic-types';
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
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: TEST_ROOTS,
  });
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
    args: [
      {
        sourcesFile: sources,
        sourceName: 'demo',
        bbox: [5.7, 44.0, 6.5, 44.6],
        levels: [3, 5],
        into: path.join(dir, 'alps.mbtiles'),
        ...extra,
      },
    ],
  });

/** The CLI as a user runs it, against this file's server and worker. */
const cli = (args: string[]) =>
  new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(
      process.execPath,
      [path.join(__dirname, '..', '..', 'src', 'cli', 'main.js'), ...args],
      { env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
    );
  });

test('levels 3-5 into MBTiles: every served tile once, rows counted from the south, the metadata GDAL reads; a manifest per level and no image', async () => {
  const result = await seed({}, 'alps');
  assert.equal(result.levels.length, 3);
  const into = path.join(dir, 'alps.mbtiles');
  assert.equal(result.into, into);
  const db = new Database(into, { readonly: true });
  try {
    assert.equal(db.pragma('application_id', { simple: true }), 0x4d504258);
    const meta = Object.fromEntries(
      (db.prepare('SELECT name, value FROM metadata').all() as { name: string; value: string }[]).map((r) => [
        r.name,
        r.value,
      ]),
    );
    assert.deepEqual(
      [meta.name, meta.format, meta.minzoom, meta.maxzoom, meta.type],
      ['demo', 'png', '3', '5', 'baselayer'],
    );
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
      const rows = db
        .prepare('SELECT tile_column x, tile_row r, tile_data d FROM tiles WHERE zoom_level = ?')
        .all(z) as { x: number; r: number; d: Buffer }[];
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
  const doc = JSON.parse(info.stdout) as {
    driverShortName: string;
    stac?: { 'proj:epsg'?: number };
    bands: { overviews?: unknown[] }[];
  };
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
  await refused(
    { levels: [5, 3] },
    'inverted',
    /^seed request: levels: the first level must not be after the last \(got \[5,3\]\)$/,
  );
  await refused(
    { levels: [3, 31] },
    'deep',
    /levels: must be \[first, last\], whole zoom levels 0\.\.30 \(got \[3,31\]\)/,
  );
  await refused(
    { into: path.join(dir, 'alps.sqlite') },
    'ext',
    /into: must be a path or an s3:\/\/ URL ending in \.mbtiles/,
  );
  // A bucket the worker allows none of: its first level's planning refuses it, naming the variable to set.
  await refused(
    { into: 's3://maps/alps.mbtiles' },
    's3',
    /output: "s3:\/\/maps\/alps\.z3\.tif" cannot be used: this worker allows no bucket; set TILEBREAKER_OUTPUT_BUCKETS/,
  );
  await refused(
    { directChunks: true } as Partial<SeedRequest>,
    'chunks',
    /directChunks: a seed fetches tiles, not chunks \(got true\)/,
  );
  // Outside the worker's output roots: the first level's planning refuses it, nothing is written.
  await refused(
    { into: '/srv/maps/alps.mbtiles' },
    'roots',
    /output: "\/srv\/maps\/alps\.z3\.tif" is outside this worker's roots/,
  );
});

test('tilebreaker seed: one command over levels into MBTiles, a line per level and exit 0; a bad --levels is named before anything starts', async () => {
  const into = path.join(dir, 'cli.mbtiles');
  const r = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4-5',
    '--into',
    into,
  ]);
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
  const bad = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '14-twelve',
    '--into',
    into,
  ]);
  assert.notEqual(bad.code, 0);
  assert.match(bad.err, /--levels: must be a zoom level or a range such as 10-14 \(got "14-twelve"\)/);
  // Every level is planned here first: a source not in the file, a deepest level over maxTiles, a source on a
  // grid MBTiles cannot hold, each refused (exit 2) before any level runs.
  const missing = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'nosuch',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4',
    '--into',
    path.join(dir, 'wrong.mbtiles'),
  ]);
  assert.equal(missing.code, 2, `${missing.out}\n${missing.err}`);
  assert.match(missing.err, /nosuch/);
  const large = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4-9',
    '--max-tiles',
    '3',
    '--into',
    path.join(dir, 'large.mbtiles'),
  ]);
  assert.equal(large.code, 2, `${large.out}\n${large.err}`);
  assert.match(
    large.err,
    /maxTiles: the plan has \d+ tiles \(\d+ columns x \d+ rows at zoom 9\), more than maxTiles 3/,
  );
  assert.equal(existsSync(path.join(dir, 'large.z4.manifest.json')), false, 'no level ran');
  const lv95 = path.join(dir, 'lv95.yaml');
  writeFileSync(
    lv95,
    JSON.stringify({
      sources: {
        lv95: {
          type: 'xyz',
          url: server.template,
          grid: {
            crs: 'EPSG:2056',
            origin: [2_420_000, 1_350_000],
            resolutions: [1000, 500],
            extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
          },
        },
      },
    }),
  );
  const projected = await cli([
    'seed',
    '--sources',
    lv95,
    '--source',
    'lv95',
    '--bbox',
    '7.4,46.9,7.5,47',
    '--levels',
    '0-1',
    '--into',
    path.join(dir, 'lv95.mbtiles'),
  ]);
  assert.equal(projected.code, 2, `${projected.out}\n${projected.err}`);
  assert.match(
    projected.err,
    /--into: an MBTiles file holds Web Mercator tiles; the source "lv95" is on a grid in EPSG:2056/,
  );
  // A level's configuration error found by the worker (the file on the workers only): exit 4, the field named.
  const wrong = await cli([
    'seed',
    '--sources',
    sources,
    '--sources-on-worker',
    '--source',
    'nosuch',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4',
    '--into',
    path.join(dir, 'wrong.mbtiles'),
  ]);
  assert.equal(wrong.code, 4, `${wrong.out}\n${wrong.err}`);
  assert.match(wrong.err, /seed seed\/wrong-[0-9a-f]{8} failed: .*nosuch/);
  // Under --json, the same failure as one JSON object on stdout, with the same exit code.
  const wrongJson = await cli([
    'seed',
    '--sources',
    sources,
    '--sources-on-worker',
    '--source',
    'nosuch',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4',
    '--into',
    path.join(dir, 'wrong.mbtiles'),
    '--json',
  ]);
  assert.equal(wrongJson.code, 4, `${wrongJson.out}\n${wrongJson.err}`);
  const e = (
    JSON.parse(wrongJson.out) as { error: { message: string; kind: string; exitCode: number; workflowId: string } }
  ).error;
  assert.deepEqual([e.kind, e.exitCode], ['failed', 4]);
  assert.match(e.workflowId, /^seed\/wrong-[0-9a-f]{8}$/);
  assert.match(e.message, /^seed seed\/wrong-[0-9a-f]{8} failed: .*nosuch/);
  assert.doesNotMatch(wrongJson.err, /failed: /);
});

test('refresh mode: tiles fetched within the age are kept with no request; older ones are asked for conditionally, a 304 renews them, a changed tile is fetched anew', async () => {
  const fresh = await startDemoTileServer({ latencyMs: 1, validators: true });
  try {
    const file = path.join(dir, 'refresh-sources.yaml');
    writeFileSync(file, `sources:\n  cdn:\n    type: xyz\n    url: ${fresh.template}\n    concurrency: 4\n`);
    const into = path.join(dir, 'refresh.mbtiles');
    const run = (refreshBefore: string, id: string) =>
      seed(
        { sourcesFile: file, sourceName: 'cdn', bbox: [5.0, 44.0, 8.0, 46.5], levels: [5, 7], into, refreshBefore },
        id,
      );
    const tilesOf = (r: SeedResult) => r.levels.flatMap((l) => readManifest(l).tiles);
    const packed = () => {
      const db = new Database(into, { readonly: true });
      try {
        return new Map(
          (
            db.prepare('SELECT zoom_level z, tile_column x, tile_row r, tile_data d FROM tiles').all() as {
              z: number;
              x: number;
              r: number;
              d: Buffer;
            }[]
          ).map((t) => [`${t.z}/${t.x}/${t.r}`, t.d]),
        );
      } finally {
        db.close();
      }
    };

    // The first run: nothing in the store, every tile fetched.
    const first = await run('1h', 'refresh-1');
    const total = first.levels.reduce((n, l) => n + l.total, 0);
    assert.ok(total >= 6, `levels 5-7 plan ${total} tiles`);
    assert.equal(first.tiles, total);
    assert.equal(fresh.stats.ok, total);
    const before = packed();

    // Again within the hour: every tile kept from the store, not one request.
    const kept = await run('1h', 'refresh-2');
    assert.equal(fresh.stats.requests, total, 'no request for a tile fetched within the age');
    assert.equal(kept.tiles, total);
    for (const t of tilesOf(kept)) {
      assert.equal(t.status, 'ok');
      assert.equal(t.attempts, 0);
      assert.match(t.reason, /^kept: in the store since \d{4}-\d\d-\d\dT.*, within the refresh age$/);
    }
    assert.deepEqual(packed(), before);

    // Everything fetched before now is old: asked for with its ETag, each answered 304, and renewed.
    const cutoff = Date.now();
    const confirmed = await run(new Date(cutoff).toISOString(), 'refresh-3');
    assert.equal(fresh.stats.notModified, total, 'one conditional request per tile, each answered 304');
    assert.equal(fresh.stats.ok, total, 'no tile body sent again');
    for (const t of tilesOf(confirmed)) {
      assert.equal(t.status, 'ok');
      assert.equal(t.httpStatus, 304);
      assert.equal(t.reason, 'not modified since the stored copy');
    }
    assert.deepEqual(packed(), before);
    const store = openTileStore(path.join(dir, 'refresh.tiles'));
    for (const t of tilesOf(confirmed)) {
      const stored = await store.get('cdn', t);
      assert.ok(stored && stored.meta.fetchedAt >= cutoff, `${t.z}/${t.x}/${t.y} renewed by its 304`);
      assert.match(stored.meta.etag ?? '', /^"\d+-\d+-\d+-g0"$/);
    }
    // ...so a refresh with the same cutoff keeps them all.
    const requests = fresh.stats.requests;
    await run(new Date(cutoff).toISOString(), 'refresh-4');
    assert.equal(fresh.stats.requests, requests);

    // The map is drawn anew: the next refresh's conditional requests get 200s with the new tiles.
    fresh.redraw();
    const redrawn = await run(new Date(Date.now()).toISOString(), 'refresh-5');
    assert.equal(fresh.stats.ok, 2 * total, 'every tile sent again');
    for (const t of tilesOf(redrawn)) assert.equal(t.httpStatus, 200);
    const after = packed();
    assert.equal(after.size, before.size);
    assert.ok(
      [...after].some(([k, d]) => !d.equals(before.get(k)!)),
      'the MBTiles file holds the redrawn tiles',
    );
  } finally {
    await fresh.close();
  }
});

test('refreshBefore is checked: an age or an instant, and not with directChunks', () => {
  assert.throws(
    () =>
      parseMosaicRequest({
        sourcesFile: 's.yaml',
        sourceName: 'a',
        bbox: [0, 0, 1, 1],
        zoom: 3,
        output: 'a.tif',
        refreshBefore: 'last week',
      }),
    /refreshBefore: must be an age such as 7d or 12h, or an ISO-8601 instant such as 2026-12-01T00:00:00Z \(got "last week"\)/,
  );
  assert.throws(
    () =>
      parseMosaicRequest({
        sourcesFile: 's.yaml',
        sourceName: 'a',
        bbox: [0, 0, 1, 1],
        zoom: 3,
        output: 'a.tif',
        refreshBefore: '7d',
        directChunks: true,
      }),
    /refreshBefore: needs a tile cache to keep tiles from; directChunks keeps none/,
  );
  // Any instant passes as written, whatever today is (the cutoff is the planner's, against its clock).
  const instant = new Date(Date.UTC(2001, 6, 1)).toISOString();
  assert.equal(
    parseMosaicRequest({
      sourcesFile: 's.yaml',
      sourceName: 'a',
      bbox: [0, 0, 1, 1],
      zoom: 3,
      output: 'a.tif',
      refreshBefore: instant,
    }).refreshBefore,
    instant,
  );
});

test('tilebreaker seed --coverage: only the tiles overlapping the polygon are fetched and packed, the rest recorded outside; exit 0', async () => {
  // An L of five z6 tiles (three across the top, two more down the left), drawn in degrees from the tiles'
  // corners (the XYZ formulas, not the product's) and drawn in by a hundredth of a tile, so it touches no
  // other tile. At z7 each of its tiles is four.
  const [x0, y0, n] = [33, 22, 2 ** 6];
  const lon = (x: number) => (x / n) * 360 - 180;
  const lat = (y: number) => (Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / n))) * 180) / Math.PI;
  const e = 0.01;
  const ring = [
    [x0 + e, y0 + e],
    [x0 + 3 - e, y0 + e],
    [x0 + 3 - e, y0 + 1 - e],
    [x0 + 1 - e, y0 + 1 - e],
    [x0 + 1 - e, y0 + 3 - e],
    [x0 + e, y0 + 3 - e],
    [x0 + e, y0 + e],
  ].map(([x, y]) => [lon(x!), lat(y!)]);
  const file = path.join(dir, 'l-shape.geojson');
  writeFileSync(
    file,
    JSON.stringify({
      type: 'FeatureCollection',
      features: [{ type: 'Feature', properties: { name: 'L' }, geometry: { type: 'Polygon', coordinates: [ring] } }],
    }),
  );
  const expected = new Set<string>();
  for (const [cx, cy] of [
    [0, 0],
    [1, 0],
    [2, 0],
    [0, 1],
    [0, 2],
  ]) {
    expected.add(`6/${x0 + cx!}/${y0 + cy!}`);
    for (const [dx, dy] of [
      [0, 0],
      [1, 0],
      [0, 1],
      [1, 1],
    ])
      expected.add(`7/${2 * (x0 + cx!) + dx!}/${2 * (y0 + cy!) + dy!}`);
  }
  const into = path.join(dir, 'l-shape.mbtiles');
  const requests = server.stats.requests;
  const r = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--coverage',
    file,
    '--levels',
    '6-7',
    '--into',
    into,
  ]);
  assert.equal(r.code, 0, `${r.out}\n${r.err}`);
  assert.equal(server.stats.requests - requests, expected.size, 'one request per covered tile, none outside');
  assert.match(r.out, /ok 5\/9, stale 0, hole 0, dead-lettered 0, failed 0, outside the coverage 4/);
  assert.match(r.out, /ok 20\/36, stale 0, hole 0, dead-lettered 0, failed 0, outside the coverage 16/);
  const db = new Database(into, { readonly: true });
  try {
    const rows = db.prepare('SELECT zoom_level z, tile_column x, tile_row r FROM tiles').all() as {
      z: number;
      x: number;
      r: number;
    }[];
    assert.deepEqual(new Set(rows.map((t) => `${t.z}/${t.x}/${2 ** t.z - 1 - t.r}`)), expected);
  } finally {
    db.close();
  }
  for (const z of [6, 7]) {
    const manifest = JSON.parse(readFileSync(path.join(dir, `l-shape.z${z}.manifest.json`), 'utf8')) as {
      tiles: { z: number; x: number; y: number; status: string; attempts: number; reason: string }[];
    };
    for (const t of manifest.tiles) {
      const inside = expected.has(`${t.z}/${t.x}/${t.y}`);
      assert.equal(t.status, inside ? 'ok' : 'outside', `${t.z}/${t.x}/${t.y}`);
      if (!inside) assert.deepEqual([t.attempts, t.reason], [0, 'outside the coverage: not fetched']);
    }
  }
});

test('tilebreaker seed --schedule: a Temporal Schedule whose runs seed the file; listed as a seed, triggered, deleted', async () => {
  const into = path.join(dir, 'weekly.mbtiles');
  const made = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4-5',
    '--into',
    into,
    '--schedule',
    '0 3 * * 0',
    '--timezone',
    'Europe/Zurich',
    '--deadline',
    '6h',
  ]);
  assert.equal(made.code, 0, `${made.out}\n${made.err}`);
  assert.match(
    made.out,
    /^created schedule seed-weekly: seed levels 4-5 into \/.*weekly\.mbtiles, "0 3 \* \* 0" \(Europe\/Zurich\)$/m,
  );
  assert.equal(existsSync(into), false, 'nothing seeded until the schedule runs');
  const listed = await cli(['schedule', 'list']);
  assert.match(listed.out, /^seed-weekly {2}0 3 \* \* 0 \(Europe\/Zurich\) {2}active {2}next \d{4}-.*\(seed\)$/m);
  // A run now, as the cron would start one: a seedWorkflow that fills the file.
  const schedule = env.client.schedule.getHandle('seed-weekly');
  await schedule.trigger();
  let runId: string | undefined;
  for (let i = 0; i < 200 && runId === undefined; i++) {
    const recent = (await schedule.describe()).info.recentActions;
    runId = recent
      .map((a) => ('workflow' in a.action ? a.action.workflow.workflowId : undefined))
      .find((w) => w !== undefined);
    if (runId === undefined) await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(runId ?? '', /^seed-schedule\/seed-weekly-/);
  const run = (await env.client.workflow.getHandle(runId!).result()) as ScheduledSeedResult;
  assert.equal(run.outcome, 'completed');
  // Under the file's own id, as a seed started by hand.
  assert.equal(run.workflowId, seedWorkflowId(into));
  const result = run.result;
  assert.equal(result.into, into);
  assert.equal(seedExitCode(result), 0);
  assert.ok(result.tiles > 0 && existsSync(into));
  // While a seed of the same file holds its id (one started by hand, here held by a delayed start), a
  // scheduled run does not seed beside it: it ends skipped, naming it.
  const held = await env.client.workflow.start('seedWorkflow', {
    taskQueue,
    workflowId: seedWorkflowId(into),
    args: [{ sourcesFile: sources, sourceName: 'demo', bbox: [5.7, 44.0, 6.5, 44.6], levels: [4, 5], into }],
    startDelay: '1h',
  });
  try {
    const skipped = (await env.client.workflow.execute('scheduledSeedWorkflow', {
      taskQueue,
      workflowId: `seed-schedule-by-hand-${process.pid}`,
      args: [
        {
          request: { sourcesFile: sources, sourceName: 'demo', bbox: [5.7, 44.0, 6.5, 44.6], levels: [4, 5], into },
          workflowId: seedWorkflowId(into),
          scheduleId: 'seed-weekly',
        },
      ],
    })) as ScheduledSeedResult;
    assert.equal(skipped.outcome, 'skipped');
    assert.match(
      (skipped as { message: string }).message,
      /^skipped: seed\/weekly-[0-9a-f]{8} is already running \(a seed of .*weekly\.mbtiles, by hand or by another schedule\)$/,
    );
  } finally {
    await held.terminate('test over');
  }
  const deleted = await cli(['schedule', 'delete', 'seed-weekly']);
  assert.equal(deleted.code, 0, deleted.err);
  assert.doesNotMatch((await cli(['schedule', 'list'])).out, /seed-weekly/);
  // The schedule's flags without --schedule are a mistake, said before anything is made.
  const stray = await cli([
    'seed',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44.0,6.5,44.6',
    '--levels',
    '4',
    '--into',
    into,
    '--schedule-id',
    'x',
  ]);
  assert.notEqual(stray.code, 0);
  assert.match(stray.err, /--schedule-id and --timezone go with --schedule/);
});

test('a re-seed that keeps its levels: a seed that meets an outage keeps every tile the file had, says so, and exits as gaps', async () => {
  // A server of its own: the outage opens this server's breaker, not the one the other tests share.
  const flaky = await startDemoTileServer({ latencyMs: 1 });
  try {
    const file = path.join(dir, 'keep.yaml');
    writeFileSync(file, `sources:\n  keep:\n    type: xyz\n    url: ${flaky.template}\n    concurrency: 4\n`);
    const into = path.join(dir, 'keep.mbtiles');
    const run = (id: string) =>
      env.client.workflow.execute('seedWorkflow', {
        taskQueue,
        workflowId: `seed-${id}-${process.pid}`,
        args: [
          {
            sourcesFile: file,
            sourceName: 'keep',
            bbox: [5.7, 44.0, 6.5, 44.6],
            levels: [3, 4],
            into,
            fallback: 'fail-fast',
          } satisfies SeedRequest,
        ],
      }) as Promise<SeedResult>;
    const rows = () => {
      const db = new Database(into, { readonly: true });
      try {
        const tiles = db
          .prepare('SELECT zoom_level z, tile_column x, tile_row y, tile_data d FROM tiles ORDER BY z, x, y')
          .all() as { z: number; x: number; y: number; d: Buffer }[];
        const meta = Object.fromEntries(
          (db.prepare('SELECT name, value FROM metadata').all() as { name: string; value: string }[]).map((r) => [
            r.name,
            r.value,
          ]),
        );
        return { tiles, meta };
      } finally {
        db.close();
      }
    };
    const good = await run('keep-1');
    assert.equal(seedExitCode(good), 0);
    const before = rows();
    assert.ok(
      before.tiles.length > 0 && good.tiles === before.tiles.length,
      `${good.tiles} packed, ${before.tiles.length} rows`,
    );

    // The same seed while the server answers 503: no tile served, every one of the file's tiles kept.
    flaky.setDown(true);
    const bad = await run('keep-2');
    assert.equal(seedExitCode(bad), 3, JSON.stringify(bad.levels.map((l) => l.counts)));
    assert.equal(
      bad.levels.reduce((a, l) => a + l.counts.ok + l.counts.stale, 0),
      0,
      'the outage served nothing',
    );
    assert.equal(bad.kept, before.tiles.length, JSON.stringify({ tiles: bad.tiles, kept: bad.kept }));
    assert.equal(bad.tiles, before.tiles.length);
    const after = rows();
    assert.deepEqual(
      after.tiles.map((t) => `${t.z}/${t.x}/${t.y}`),
      before.tiles.map((t) => `${t.z}/${t.x}/${t.y}`),
    );
    assert.ok(
      after.tiles.every((t, k) => t.d.equals(before.tiles[k]!.d)),
      'the same bytes',
    );
    assert.deepEqual(
      [after.meta.minzoom, after.meta.maxzoom, after.meta.format, after.meta.bounds],
      [before.meta.minzoom, before.meta.maxzoom, before.meta.format, before.meta.bounds],
    );
  } finally {
    flaky.setDown(false);
    await flaky.close();
  }
});

/** Reads a workflow's status every 200 ms until it runs (2 min at most). */
async function untilRunning(workflowId: string): Promise<void> {
  for (let k = 0; ; k++) {
    const status = await env.client.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        (d) => d.status.name as string,
        (err: unknown) => String(err),
      );
    if (status === 'RUNNING') return;
    if (k >= 600) throw new Error(`${workflowId} not running: ${status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test(
  'a seed level and its re-drive as one run: refused while the seed runs the level, naming it; once it has ended, the re-drive takes the level id',
  { timeout: 600_000 },
  async () => {
    const into = path.join(dir, 'held.mbtiles');
    const levelId = `${seedWorkflowId(into)}/z8`;
    const manifest = path.join(dir, 'held.z8.manifest.json');
    // About 60 tiles at zoom 8: from the slow renderer (one tile every 2 s) the level outlasts the checks; it is cancelled.
    const area = {
      sourceName: 'demo',
      bbox: [5.7, 44, 19.5, 49.9] as [number, number, number, number],
      levels: [8, 8] as [number, number],
      into,
    };
    const down = await startDemoTileServer({ latencyMs: 2 });
    const slow = await startDemoTileServer({ latencyMs: 2_000 });
    const sourcesFor = (name: string, s: DemoTileServer, concurrency: number) => {
      const file = path.join(dir, `${name}.yaml`);
      writeFileSync(
        file,
        `sources:\n  demo:\n    type: xyz\n    url: ${s.template}\n    concurrency: ${concurrency}\n`,
      );
      return file;
    };
    try {
      // Dead letters first: the renderer is down, the breaker trips and refuses the rest (fail-fast).
      down.setDown(true);
      const first = await (
        await startSeed(env.client, taskQueue, {
          ...area,
          sourcesFile: sourcesFor('down', down, 4),
          fallback: 'fail-fast',
        })
      ).result();
      assert.ok(readManifest(first.levels[0]!).counts['dead-lettered'] > 0, JSON.stringify(first.levels[0]!.counts));
      // The seed again, from the slow renderer: its level runs (and plans anew) while a re-drive is tried.
      const again = await startSeed(env.client, taskQueue, { ...area, sourcesFile: sourcesFor('slow', slow, 1) });
      await untilRunning(levelId);
      // As from a machine that cannot read the manifest (a bucket, another disk): the level is found by its id alone.
      unlinkSync(manifest);
      try {
        await assert.rejects(startRedrive(env.client, taskQueue, manifest), {
          message: `mosaic ${levelId} (a level of seed ${seedWorkflowId(into)}) is still running; re-drive it once it has finished, or cancel it first (tilebreaker mosaic cancel ${levelId})`,
        });
      } finally {
        await again.cancel();
      }
      await assert.rejects(again.result());
      await env.client.workflow
        .getHandle(levelId)
        .result()
        .catch(() => undefined);
      // No level runs now: the re-drive runs, under the level's id, and fetches what the cancelled level left.
      const id = await startRedrive(env.client, taskQueue, manifest, undefined, {
        sourcesFile: sources,
        sourceName: 'demo',
      });
      assert.equal(id, levelId);
      const redriven = (await env.client.workflow.getHandle(id).result()) as MosaicResult;
      assert.equal(redriven.counts.ok, readManifest(redriven).total, JSON.stringify(redriven.counts));
    } finally {
      await down.close();
      await slow.close();
    }
  },
);
