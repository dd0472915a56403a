import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import sharp from 'sharp';
import { confineLocation } from '../../src/activities/confine/confine-location';
import { ConfigError } from '../../src/breaker/config-error';
import { ObjectTileStore } from '../../src/activities/tile-store/object-tile-store';
import { openCheckpoint, removeCheckpoints } from '../../src/activities/mosaic/batch-checkpoint';
import { objectStorage } from '../../src/activities/storage/storage';
import { s3Client } from '../../src/activities/storage/s3-client';
import { joinLocation, locationWithin, objectUrlRefusal, parentLocation } from '../../src/activities/storage/location';
import { packageRoot } from '../../src/client/local-server';
import { startMosaic } from '../../src/client/mosaics';
import { seedExitCode, startSeed } from '../../src/client/seeds';
import type { SeedRequest } from '../../src/messages/seed-types';
import Database from 'better-sqlite3';
import { createWorker } from '../../src/client/worker';
import { useS3Env } from '../helpers/s3-env';
import { startLocalS3, type LocalS3 } from '../../src/demo/s3-server';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, demoRequest, gdalAvailable, gdalinfo, type Manifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-s3-'));
let s3: LocalS3;
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let tiles: DemoTileServer;
const taskQueue = uniqueTaskQueue('s3');
let restoreEnv: () => void = () => undefined;

before(async () => {
  s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(dir, 's3'), bucket: 'mosaics' });
  // The worker in this process reads the AWS SDK's own variables, as a worker in a fleet would.
  restoreEnv = useS3Env(s3.env);
  tiles = await startDemoTileServer({ latencyMs: 2 });
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    roots: { ...TEST_ROOTS, buckets: ['s3://mosaics/nightly'] },
  });
  running = worker.run();
});

after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await tiles?.close();
  await s3?.stop();
  restoreEnv();
  rmSync(dir, { recursive: true, force: true });
});

/** Levels 7-8 over the western Alps, from this file's demo tile server. */
const demoSeed = (into: string): SeedRequest => ({
  source: { type: 'xyz', url: tiles.template },
  sourceName: 'demo',
  bbox: [6.0, 45.0, 8.0, 46.5],
  levels: [7, 8],
  into,
});

const read = async (url: string): Promise<Buffer> => {
  const { bucket, key } = { bucket: url.slice(5).split('/')[0]!, key: url.slice(5).split('/').slice(1).join('/') };
  const out = await s3.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return Buffer.from(await out.Body!.transformToByteArray());
};

test('object URLs: canonical keys only, joined and split on whole segments', () => {
  assert.equal(objectUrlRefusal('s3://mosaics/a/b.tif'), null);
  assert.match(objectUrlRefusal('s3://mosaics/a/../b.tif') ?? '', /'\.\.' segment/);
  assert.match(objectUrlRefusal('s3://mosaics/a//b.tif') ?? '', /empty/);
  assert.match(objectUrlRefusal('s3://Bad_Bucket/a') ?? '', /bucket name/);
  assert.match(objectUrlRefusal('/local/path') ?? '', /must start with s3:\/\//);
  assert.equal(joinLocation('s3://mosaics/nightly', 'p.work', 'plan.json'), 's3://mosaics/nightly/p.work/plan.json');
  assert.throws(() => joinLocation('s3://mosaics/nightly', '../other'), /cannot join/);
  assert.equal(parentLocation('s3://mosaics/nightly/p.tif'), 's3://mosaics/nightly');
  assert.ok(locationWithin('s3://mosaics/nightly/p.tif', 's3://mosaics/nightly'));
  assert.ok(
    !locationWithin('s3://mosaics/nightly-other/p.tif', 's3://mosaics/nightly'),
    'a prefix counts on whole segments',
  );
  assert.ok(!locationWithin('s3://other/nightly/p.tif', 's3://mosaics/nightly'));
  assert.ok(!locationWithin('/tmp/nightly/p.tif', 's3://mosaics/nightly'));
});

test("bucket roots: a location outside the worker's bucket prefixes, or any bucket without them, is refused naming the field and the value", async () => {
  const roots = { ...TEST_ROOTS, buckets: ['s3://mosaics/nightly'] };
  assert.equal(
    await confineLocation('s3://mosaics/nightly/alps.tif', roots, 'output', 'mosaic request'),
    's3://mosaics/nightly/alps.tif',
  );
  for (const [loc, why] of [
    [
      's3://mosaics/other/alps.tif',
      /output: "s3:\/\/mosaics\/other\/alps.tif" is outside this worker's bucket prefixes \(s3:\/\/mosaics\/nightly\)/,
    ],
    ['s3://mosaics/nightly/../other/alps.tif', /output: .* '\.\.' segment/],
    ['s3://mosaics/nightlyx/alps.tif', /outside/],
  ] as const) {
    await assert.rejects(
      confineLocation(loc, roots, 'output', 'mosaic request'),
      (err: Error) => err instanceof ConfigError && why.test(err.message),
    );
  }
  await assert.rejects(
    confineLocation('s3://mosaics/nightly/alps.tif', TEST_ROOTS, 'storeRoot', 'fetch batch'),
    /storeRoot: .* this worker allows no bucket; set TILEBREAKER_OUTPUT_BUCKETS/,
  );
});

test('storage on a real S3 server: missing reads are null, folders list, trees go, a large upload is multipart with a checksum', async () => {
  const storage = objectStorage(s3.client);
  assert.equal(await storage.read('s3://mosaics/t/none.json'), null);
  await storage.write('s3://mosaics/t/a/one.json', Buffer.from('{"a":1}'));
  await storage.write('s3://mosaics/t/a/sub/two.json', Buffer.from('2'));
  await storage.write('s3://mosaics/t/ab/three.json', Buffer.from('3'));
  assert.deepEqual((await storage.list('s3://mosaics/t/a')).sort(), ['one.json', 'sub']);
  assert.deepEqual(await storage.list('s3://mosaics/t/none'), []);
  assert.equal((await storage.read('s3://mosaics/t/a/one.json'))?.toString(), '{"a":1}');
  await storage.removeTree('s3://mosaics/t/a');
  assert.deepEqual(await storage.list('s3://mosaics/t/a'), []);
  assert.deepEqual(
    await storage.list('s3://mosaics/t/ab'),
    ['three.json'],
    'a sibling sharing the prefix is not removed',
  );

  // 40 MiB: three parts of 16 MiB.
  const big = Buffer.alloc(40 * 1024 * 1024);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE(i, i);
  const file = path.join(dir, 'big.bin');
  writeFileSync(file, big);
  await storage.upload(file, 's3://mosaics/t/big.bin');
  const head = await s3.client.send(
    new HeadObjectCommand({ Bucket: 'mosaics', Key: 't/big.bin', ChecksumMode: 'ENABLED' }),
  );
  assert.equal(head.ContentLength, big.length);
  assert.match(head.ETag ?? '', /-3"$/, `a multipart upload of three parts (ETag ${head.ETag})`);
  assert.ok(head.ChecksumSHA256, 'the object carries the SHA-256 checksum it was uploaded with');
  assert.ok((await read('s3://mosaics/t/big.bin')).equals(big));
  await assert.rejects(
    objectStorage(s3.client).write('s3://no-such-bucket/x', Buffer.from('x')),
    /storage: cannot write s3:\/\/no-such-bucket\/x \(NoSuchBucket, HTTP 404\)/,
  );
});

test('the tile store in a bucket: tiles round-trip with their validators, the newest copy wins, chunks are named by their request', async () => {
  const store = new ObjectTileStore('s3://mosaics/store', s3.client);
  const png = await sharp({ create: { width: 256, height: 256, channels: 4, background: '#3366cc' } })
    .png()
    .toBuffer();
  const t = { z: 3, x: 4, y: 2 };
  assert.equal(await store.get('osm', t), null);
  const put = await store.put('osm', t, png, {
    fetchedAt: 1_700_000_000_000,
    contentType: 'image/png',
    etag: '"v1"',
    lastModified: 'Tue, 14 Nov 2023 22:13:20 GMT',
  });
  assert.deepEqual(put, { path: 's3://mosaics/store/osm/3/4/2.png', bytes: png.length });
  const got = await store.get('osm', t);
  assert.equal(got?.path, put.path);
  assert.deepEqual(got?.meta, {
    fetchedAt: 1_700_000_000_000,
    contentType: 'image/png',
    bytes: png.length,
    sha256: got.meta.sha256,
    etag: '"v1"',
    lastModified: 'Tue, 14 Nov 2023 22:13:20 GMT',
    width: 256,
    height: 256,
  });
  // The server changed format a second later: the JPEG is the tile now.
  await new Promise((r) => setTimeout(r, 1_100));
  const jpeg = await sharp(png).jpeg().toBuffer();
  await store.put('osm', t, jpeg, { fetchedAt: Date.now(), contentType: 'image/jpeg' });
  assert.equal((await store.get('osm', t))?.path, 's3://mosaics/store/osm/3/4/2.jpg');
  // A copy another writer left without our metadata describes itself.
  await objectStorage(s3.client).write('s3://mosaics/store/osm/3/5/2.png', png);
  const foreign = await store.get('osm', { z: 3, x: 5, y: 2 });
  assert.equal(foreign?.meta.etag, undefined);
  assert.equal(foreign?.meta.width, 256);
  const chunk = await store.putChunk(
    'osm',
    3,
    { url: 'http://x/wms?bbox=1', width: 512, height: 512 },
    png,
    'image/png',
  );
  assert.match(chunk, /^s3:\/\/mosaics\/store\/osm\/chunks\/3\/512x512-[0-9a-f]{24}\.png$/);
  await assert.rejects(store.put('../etc', t, png, { fetchedAt: 0, contentType: 'image/png' }), /source name/);
});

test('a bucket killed for 3 s under 48 tile writes at once: every write waits it out and lands, none fails (a failed one would be fetched again)', async () => {
  // The worker's own client (the SDK's variables, set for this file), with its retries.
  const store = new ObjectTileStore('s3://mosaics/restart', s3Client());
  const png = await sharp({ create: { width: 256, height: 256, channels: 4, background: '#cc6633' } })
    .png()
    .toBuffer();
  await s3.stop(true);
  const writes = Array.from({ length: 48 }, (_, i) =>
    store.put('osm', { z: 6, x: i, y: 7 }, png, { fetchedAt: Date.now(), contentType: 'image/png' }).then(
      () => 'ok',
      (err: Error) => err.message,
    ),
  );
  await new Promise((r) => setTimeout(r, 3_000));
  await s3.start();
  const outcomes = await Promise.all(writes);
  assert.deepEqual(
    outcomes.filter((o) => o !== 'ok'),
    [],
  );
  for (let i = 0; i < 48; i++)
    assert.ok(await store.get('osm', { z: 6, x: i, y: 7 }), `tile 6/${i}/7 is in the bucket`);
});

test('a mosaic into a bucket: plan, journals, tile store, mask, manifest and GeoTIFF all in the bucket, every tile accounted for; a re-drive reads it back', async () => {
  const out = 's3://mosaics/nightly/alps.tif';
  const req = demoRequest(tiles, dir, 'alps', { output: out });
  const handle = await startMosaic(env.client, taskQueue, req);
  const result = await handle.result();
  assert.equal(result.output, out);
  assert.equal(result.manifest, 's3://mosaics/nightly/alps.manifest.json');
  const m = JSON.parse((await read(result.manifest)).toString('utf8')) as Manifest;
  assert.equal(assertAccounted(m), null);
  assert.equal(m.counts.ok, 130);
  assert.ok(
    m.tiles.every((t) => t.path?.startsWith('s3://mosaics/nightly/alps.tiles/demo/8/')),
    'every tile is in the tile store beside the output, in the bucket',
  );
  for (const f of ['alps.tif', 'alps.tif.aux.xml', 'alps.tfw', 'alps.prj', 'alps.mask.png', 'alps.manifest.json']) {
    assert.ok(m.files.includes(`s3://mosaics/nightly/${f}`), `the manifest lists ${f}: ${m.files.join(', ')}`);
  }
  const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: 'mosaics', Prefix: 'nightly/alps.work/' }));
  const keys = (listed.Contents ?? []).map((c) => c.Key!);
  assert.ok(keys.includes('nightly/alps.work/plan.json'), `the plan is in the bucket: ${keys.join(', ')}`);
  assert.ok(
    keys.some((k) => /^nightly\/alps\.work\/journal-[^/]+\/.+\.json$/.test(k)),
    'so are the journals',
  );
  const tif = await read(out);
  const meta = await sharp(tif).metadata();
  assert.deepEqual([meta.width, meta.height], [13 * 256, 10 * 256]);
  if (gdalAvailable()) {
    const local = path.join(await mkdtemp(path.join(dir, 'get-')), 'alps.tif');
    await writeFile(local, tif);
    for (const f of ['alps.tif.aux.xml', 'alps.tfw', 'alps.prj'])
      await writeFile(path.join(path.dirname(local), f), await read(`s3://mosaics/nightly/${f}`));
    assert.match(gdalinfo(local).coordinateSystem.wkt, /Pseudo-Mercator|3857/);
    await rm(path.dirname(local), { recursive: true });
  }

  // A re-drive finds the plan and journals in the bucket; nothing is dead-lettered, so nothing is fetched.
  const before = tiles.stats.requests;
  const redrive = await env.client.workflow.start('redriveMosaicWorkflow', {
    taskQueue,
    workflowId: `redrive-s3-${process.pid}`,
    args: [{ manifest: result.manifest }],
  });
  const r2 = (await redrive.result()) as MosaicResult;
  assert.equal(r2.counts.ok, 130);
  assert.equal(tiles.stats.requests, before);
});

/**
 * better-sqlite3 is a native module built for the Node.js that installed it: under another one (the Node 24
 * subset of .ci/run, with node_modules from Node 20) it cannot load, and the pack with it.
 */
function sqliteUnavailable(): string | false {
  try {
    new Database(':memory:').close();
    return false;
  } catch (err) {
    return `better-sqlite3 does not load under Node ${process.version}: ${(err as Error).message.split('\n')[0]}`;
  }
}

test(
  'a seed into a bucket: the levels and their tile store in the bucket, the MBTiles file uploaded whole; a bucket the worker does not allow is refused',
  { skip: sqliteUnavailable() },
  async () => {
    const result = await startSeed(env.client, taskQueue, demoSeed('s3://mosaics/nightly/seed.mbtiles')).then((h) =>
      h.result(),
    );
    assert.equal(result.into, 's3://mosaics/nightly/seed.mbtiles');
    assert.equal(seedExitCode(result), 0);
    assert.deepEqual(
      result.levels.map((l) => l.manifest),
      ['s3://mosaics/nightly/seed.z7.manifest.json', 's3://mosaics/nightly/seed.z8.manifest.json'],
    );
    const local = path.join(await mkdtemp(path.join(dir, 'seed-')), 'seed.mbtiles');
    await writeFile(local, await read(result.into));
    const db = new Database(local, { readonly: true });
    try {
      let packed = 0;
      for (const level of result.levels) {
        const m = JSON.parse((await read(level.manifest)).toString('utf8')) as Manifest & { grid: { z: number } };
        assert.equal(m.counts.ok, m.total);
        const z = m.grid.z;
        for (const t of m.tiles) {
          assert.ok(t.path?.startsWith(`s3://mosaics/nightly/seed.tiles/demo/${z}/`), t.path);
          const row = db
            .prepare('SELECT tile_data d FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?')
            .get(z, t.x, 2 ** z - 1 - t.y) as { d: Buffer } | undefined;
          assert.ok(row?.d.equals(await read(t.path!)), `z${z} ${t.x}/${t.y}: the stored object's bytes`);
          packed++;
        }
      }
      assert.equal(result.tiles, packed);
      assert.equal((db.prepare('SELECT count(*) n FROM tiles').get() as { n: number }).n, packed);
    } finally {
      db.close();
    }
    // A seed of another level into the same object keeps the levels it had (read back from the bucket).
    const z6 = await startSeed(
      env.client,
      taskQueue,
      { ...demoSeed('s3://mosaics/nightly/seed.mbtiles'), levels: [6, 6] },
      `seed-z6-${process.pid}`,
    ).then((h) => h.result());
    assert.equal(z6.kept, result.tiles, JSON.stringify({ tiles: z6.tiles, kept: z6.kept }));
    const served6 = z6.levels[0]!.counts.ok;
    assert.equal(z6.tiles, result.tiles + served6);
    await writeFile(local, await read(z6.into));
    const again = new Database(local, { readonly: true });
    try {
      const levels = again
        .prepare('SELECT zoom_level z, count(*) n FROM tiles GROUP BY zoom_level ORDER BY z')
        .all() as { z: number; n: number }[];
      assert.deepEqual(
        levels.map((l) => l.z),
        [6, 7, 8],
      );
      const meta = Object.fromEntries(
        (again.prepare('SELECT name, value FROM metadata').all() as { name: string; value: string }[]).map((r) => [
          r.name,
          r.value,
        ]),
      );
      assert.deepEqual([meta.minzoom, meta.maxzoom], ['6', '8']);
    } finally {
      again.close();
    }
    await assert.rejects(
      startSeed(
        env.client,
        taskQueue,
        demoSeed('s3://mosaics/elsewhere/seed.mbtiles'),
        `seed-elsewhere-${process.pid}`,
      ).then((h) => h.result()),
      (err: unknown) => {
        const chain: string[] = [];
        for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) chain.push(e.message);
        assert.match(chain.join(' / '), /output: "s3:\/\/mosaics\/elsewhere\/seed\.z7\.tif" is outside this worker's/);
        return true;
      },
    );
  },
);

test('a mosaic into a bucket prefix the worker does not allow is refused before any fetch, naming the field and the value', async () => {
  const before = tiles.stats.requests;
  const handle = await startMosaic(
    env.client,
    taskQueue,
    demoRequest(tiles, dir, 'x', { output: 's3://mosaics/elsewhere/x.tif' }),
  );
  await assert.rejects(handle.result(), (err: Error) => {
    const app = (err.cause as { cause?: { type?: string; message?: string } } | undefined)?.cause;
    assert.equal(app?.type, 'ConfigError');
    assert.match(
      app?.message ?? '',
      /output: "s3:\/\/mosaics\/elsewhere\/x.tif" is outside this worker's bucket prefixes \(s3:\/\/mosaics\/nightly\)/,
    );
    return true;
  });
  assert.equal(tiles.stats.requests, before);
});

test("a batch checkpoint in a bucket: what one attempt finished, a later attempt of the same run reads back; other runs' records and forged ones are ignored; the assembly removes them", async () => {
  const dir = 's3://mosaics/nightly/ck.work/journal-run';
  const tiles = [0, 1, 2, 3].map((x) => ({ z: 5, x, y: 9 }));
  const result = (x: number) => ({
    z: 5,
    x,
    y: 9,
    status: 'ok' as const,
    reason: 'fetched',
    attempts: 1,
    path: `s3://mosaics/nightly/ck.tiles/demo/5/${x}/9.png`,
  });
  const warnings: string[] = [];
  const first = await openCheckpoint(dir, 'p0-b0-0', 'wf/run-1', (w) => warnings.push(w));
  const results = tiles.map(() => null as ReturnType<typeof result> | null);
  results[0] = result(0);
  first.append([0], results);
  results[2] = result(2);
  first.append([2], results);
  await first.close();
  // Another run's attempt on the same batch id, and a forged object: neither is believed.
  const other = await openCheckpoint(dir, 'p0-b0-0', 'wf/run-0', () => undefined);
  other.append([1], [null, result(1), null, null]);
  await other.close();
  await objectStorage(s3.client).write(
    `${dir}/p0-b0-0.checkpoint/0-forged-000000.jsonl`,
    Buffer.from(
      `${JSON.stringify({ owner: 'wf/run-1', at: [[3, { z: 5, x: 99, y: 9, status: 'ok', reason: 'x', attempts: 1 }]] })}\nnot json\n`,
    ),
  );
  const again = await openCheckpoint(dir, 'p0-b0-0', 'wf/run-1', () => undefined);
  const loaded = await again.load(tiles);
  assert.deepEqual(loaded, [result(0), null, result(2), null]);
  assert.deepEqual(warnings, []);
  assert.ok((await objectStorage(s3.client).list(dir)).includes('p0-b0-0.checkpoint'));
  await removeCheckpoints(dir);
  assert.deepEqual(await objectStorage(s3.client).list(dir), []);
});

test("stale sidecars in a bucket: a run without sidecars removes the .aux.xml, world file and .prj an earlier run left beside the output (GDAL would read them before the TIFF's tags)", async () => {
  const out = 's3://mosaics/nightly/resized.tif';
  const exists = (key: string) =>
    s3.client.send(new HeadObjectCommand({ Bucket: 'mosaics', Key: key })).then(
      () => true,
      (err: unknown) => {
        if ((err as { name?: string }).name === 'NotFound') return false;
        throw err;
      },
    );
  const sidecars = ['nightly/resized.tif.aux.xml', 'nightly/resized.tfw', 'nightly/resized.prj'];
  // A small mosaic with its sidecars, then a larger one of the same output without: the old ones describe the small grid.
  await (
    await startMosaic(
      env.client,
      taskQueue,
      demoRequest(tiles, dir, 'resized', { output: out, bbox: [5.7, 44, 6.5, 44.6], zoom: 6 }),
    )
  ).result();
  for (const key of sidecars) assert.equal(await exists(key), true, `the first run wrote ${key}`);
  const second = await (
    await startMosaic(
      env.client,
      taskQueue,
      demoRequest(tiles, dir, 'resized', { output: out, bbox: [5.7, 44, 8.5, 46.6], zoom: 7, sidecars: false }),
    )
  ).result();
  for (const key of sidecars) assert.equal(await exists(key), false, `the run without sidecars removed ${key}`);
  assert.equal(await exists('nightly/resized.tif'), true);
  // The mask keeps its own (named after the mask, not the image).
  assert.ok(second.files.includes('s3://mosaics/nightly/resized.mask.png'), second.files.join(', '));
  assert.equal(await exists('nightly/resized.mask.png.aux.xml'), true);
});
