import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { assembleMosaic } from '../../src/activities/mosaic/assemble';
import { readJournals, writeJournal } from '../../src/activities/mosaic/journal';
import { planMosaic, planMosaicRun, tileOf } from '../../src/activities/mosaic/plan';
import * as tileFiles from '../../src/activities/mosaic/tile-files';
import { packMbtiles } from '../../src/activities/seed/pack';
import { readConfinedFile, StoreEscapeError } from '../../src/activities/tile-store/store-bounds';
import { TileStore } from '../../src/activities/tile-store/tile-store';
import { parseSource } from '../../src/sources/schema';
import { startFaultServer, type FaultServer } from '../helpers/fault-server';
import { gradientImage } from '../helpers/images';

/** What a file outside the roots holds: it must come back in no message and no result. */
const CANARY = 'CANARY-5d1e0b7a';
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-store-links-'));
const out = path.join(dir, 'out');
const elsewhere = path.join(dir, 'elsewhere');
mkdirSync(out);
mkdirSync(elsewhere);
const secret = path.join(elsewhere, 'secret.txt');
writeFileSync(secret, `SECRET=${CANARY}`);
const roots = { sources: [out], outputs: [out] };
const meta = () => ({ fetchedAt: Date.now(), contentType: 'image/png' });
let n = 0;
/** A fresh store folder under the output root. */
const storeDir = () => {
  const d = path.join(out, `s${n++}.tiles`);
  mkdirSync(d);
  return d;
};
/** Everything under `elsewhere` but the secret: must stay empty. */
const escaped = () => readdirSync(elsewhere, { recursive: true }).filter((f) => f !== 'secret.txt');

let server: FaultServer;
const pools = new EndpointPools();
before(async () => {
  server = await startFaultServer();
});
after(async () => {
  await pools.close();
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a tile store with symlinks inside it', () => {
  test('a source, zoom or column folder linked outside the store is refused, named relative to the store; nothing is made outside', async () => {
    const body = await gradientImage(256, 256);
    const a = storeDir();
    symlinkSync(elsewhere, path.join(a, 'good'));
    await assert.rejects(
      new TileStore(a).put('good', { z: 3, x: 4, y: 2 }, body, meta()),
      (err: Error) => err.message === 'tile store: good/3/4 leads outside the store through a symlink; not used',
    );
    const b = storeDir();
    mkdirSync(path.join(b, 'osm'));
    symlinkSync(elsewhere, path.join(b, 'osm', '3'));
    await assert.rejects(
      new TileStore(b).put('osm', { z: 3, x: 4, y: 2 }, body, meta()),
      /tile store: osm\/3\/4 leads outside the store/,
    );
    symlinkSync(elsewhere, path.join(b, 'osm', 'chunks'));
    await assert.rejects(
      new TileStore(b).putChunk('osm', 3, { url: 'http://x/1', width: 512, height: 512 }, body, 'image/png'),
      /tile store: osm\/chunks\/3 leads outside the store/,
    );
    assert.deepEqual(escaped(), []);
    // A link that stays inside the store is fine.
    const c = storeDir();
    mkdirSync(path.join(c, 'real'));
    symlinkSync(path.join(c, 'real'), path.join(c, 'alias'));
    const put = await new TileStore(c).put('alias', { z: 3, x: 4, y: 2 }, body, meta());
    assert.ok(existsSync(path.join(c, 'real', '3', '4', '2.png')), put.path);
  });

  test('a symlinked tile file or sidecar is never read: the stale read is refused without its content', async () => {
    const a = storeDir();
    mkdirSync(path.join(a, 'osm', '3', '4'), { recursive: true });
    symlinkSync(secret, path.join(a, 'osm', '3', '4', '2.png'));
    const err = await new TileStore(a).get('osm', { z: 3, x: 4, y: 2 }).then(
      () => assert.fail('expected a refusal'),
      (e: Error) => e,
    );
    assert.equal(err.message, 'tile store: osm/3/4/2.png is a symlink; not read');
    assert.ok(!err.message.includes(CANARY));
    const b = storeDir();
    const store = new TileStore(b);
    await store.put('osm', { z: 3, x: 4, y: 2 }, await gradientImage(256, 256), meta());
    symlinkSync(secret, path.join(b, 'osm', '3', '4', '2.json'));
    await assert.rejects(
      store.get('osm', { z: 3, x: 4, y: 2 }),
      /tile store: osm\/3\/4\/2\.json is a symlink; not read/,
    );
    // A column folder linked out: not read either.
    const c = storeDir();
    mkdirSync(path.join(c, 'osm', '3'), { recursive: true });
    mkdirSync(path.join(elsewhere, 'col'));
    writeFileSync(path.join(elsewhere, 'col', '2.png'), await gradientImage(256, 256));
    symlinkSync(path.join(elsewhere, 'col'), path.join(c, 'osm', '3', '4'));
    await assert.rejects(
      new TileStore(c).get('osm', { z: 3, x: 4, y: 2 }),
      /tile store: osm\/3\/4 leads outside the store/,
    );
    rmSync(path.join(elsewhere, 'col'), { recursive: true });
  });

  test('a fetch batch records such tiles as failed with the refusal (requests counted); the others are stored', async () => {
    const storeRoot = storeDir();
    mkdirSync(path.join(storeRoot, 'osm', '5'), { recursive: true });
    symlinkSync(elsewhere, path.join(storeRoot, 'osm', '5', '1'));
    const fetchTiles = makeFetchBatch({ pools, roots });
    const source = parseSource({ type: 'xyz', url: `${server.url}/ok/{z}/{x}/{y}.png`, concurrency: 2 });
    const results = await fetchTiles({
      sourceName: 'osm',
      source,
      tiles: [0, 1, 2].map((x) => ({ z: 5, x, y: 0 })),
      storeRoot,
      breaker: false,
      retry: { attempts: 1 },
    });
    assert.deepEqual(
      results.map((r) => [r.status, r.attempts]),
      [
        ['ok', 1],
        ['failed', 1],
        ['ok', 1],
      ],
    );
    assert.equal(results[1]!.kind, 'permanent');
    assert.equal(results[1]!.reason, 'tile store: osm/5/1 leads outside the store through a symlink; not used');
    assert.deepEqual(escaped(), []);
    // Under `stale`, a symlinked copy is not served: the tile fails with the refusal.
    mkdirSync(path.join(storeRoot, 'osm', '5', '7'), { recursive: true });
    symlinkSync(secret, path.join(storeRoot, 'osm', '5', '7', '0.png'));
    const down = parseSource({ type: 'xyz', url: `${server.url}/status/503/{z}/{x}/{y}.png` });
    const [stale] = await fetchTiles({
      sourceName: 'osm',
      source: down,
      tiles: [{ z: 5, x: 7, y: 0 }],
      storeRoot,
      breaker: false,
      whenRefused: 'stale',
      retry: { attempts: 1 },
    });
    assert.deepEqual(
      [stale!.status, stale!.reason, stale!.path],
      ['failed', 'tile store: osm/5/7/0.png is a symlink; not read', undefined],
    );
  });

  test('the assembly never draws a symlinked tile a journal names: the manifest records it failed', async () => {
    const source = { type: 'xyz', url: `${server.url}/ok/{z}/{x}/{y}.png` } as const;
    const plan = await planMosaic(
      { source, bbox: [5.7, 44.0, 6.0, 44.3], zoom: 5, output: path.join(out, 'asm.tif') },
      { roots, runTag: 'r1' },
    );
    const store = new TileStore(plan.storeRoot);
    const tiles = [];
    for (let i = 0; i < plan.total; i++) {
      const { z, x, y } = tileOf(plan.grid, i);
      const put = await store.put(plan.sourceName, { z, x, y }, await gradientImage(256, 256), meta());
      tiles.push({ i, z, x, y, status: 'ok' as const, reason: 'ok', attempts: 1, pass: 0, path: put.path });
    }
    // A good-looking image outside the roots, linked in place of the first tile.
    const outsideImage = path.join(elsewhere, 'outside.png');
    writeFileSync(outsideImage, await gradientImage(256, 256, 'png', 9));
    rmSync(tiles[0]!.path);
    symlinkSync(outsideImage, tiles[0]!.path);
    await writeJournal(plan.journalDir, { batchId: 'p0-b-0', pass: 0, writtenAt: Date.now(), tiles });
    const result = await assembleMosaic({ plan, partial: false }, roots);
    const manifest = JSON.parse(readFileSync(result.manifest, 'utf8')) as {
      tiles: { status: string; reason: string; path?: string }[];
    };
    assert.equal(manifest.tiles[0]!.status, 'failed');
    assert.equal(
      manifest.tiles[0]!.reason,
      `tile store: inline/5/${tiles[0]!.x}/${tiles[0]!.y}.png is a symlink; not read`,
    );
    assert.equal(manifest.tiles[0]!.path, undefined);
    assert.ok(manifest.tiles.slice(1).every((t) => t.status === 'ok'));
    assert.equal(result.counts.failed, 1);
    // A symlinked journal is not read either.
    writeFileSync(
      path.join(elsewhere, 'forged.json'),
      JSON.stringify({ batchId: 'x', pass: 9, writtenAt: 0, tiles: [] }),
    );
    symlinkSync(path.join(elsewhere, 'forged.json'), path.join(plan.journalDir, 'forged.json'));
    assert.deepEqual(
      (await readJournals(plan.journalDir)).map((j) => j.batchId),
      ['p0-b-0'],
    );
  });

  test('a symlink swapped after the first tile: the next tile in that folder is refused, nothing is written or removed outside', async () => {
    const a = storeDir();
    const store = new TileStore(a);
    const body = await gradientImage(256, 256);
    await store.put('osm', { z: 3, x: 4, y: 1 }, body, meta());
    // Copies of tile 2 under every extension in a folder outside, and the column folder swapped for a link to it.
    const col = path.join(elsewhere, 'swapped');
    mkdirSync(col);
    const held = ['2.png', '2.jpg', '2.webp', '2.json'];
    for (const f of held) writeFileSync(path.join(col, f), `outside ${f}`);
    rmSync(path.join(a, 'osm', '3', '4'), { recursive: true });
    symlinkSync(col, path.join(a, 'osm', '3', '4'));
    // As JPEG with an ETag: the write would remove the other copies and write a sidecar.
    await assert.rejects(
      store.put('osm', { z: 3, x: 4, y: 2 }, body, { fetchedAt: Date.now(), contentType: 'image/jpeg', etag: '"e"' }),
      (err: Error) =>
        err instanceof StoreEscapeError &&
        err.message === 'tile store: osm/3/4 leads outside the store through a symlink; not used',
    );
    assert.deepEqual(readdirSync(col).sort(), [...held].sort());
    for (const f of held) assert.equal(readFileSync(path.join(col, f), 'utf8'), `outside ${f}`);
    // Another column of the same store is still written.
    const put = await store.put('osm', { z: 3, x: 5, y: 2 }, body, meta());
    assert.ok(existsSync(put.path));
    rmSync(col, { recursive: true });
  });

  /** A plan of a few tiles, each stored and journalled ok; `swap` replaces tile 0 with a symlink to an image outside. */
  async function storedLevel(name: string) {
    const source = { type: 'xyz', url: `${server.url}/ok/{z}/{x}/{y}.png` } as const;
    // Planned as the activity does: the plan is written beside the journals, where the pack reads it.
    const plan = await planMosaicRun(
      { source, bbox: [5.0, 44.0, 8.0, 46.0], zoom: 8, output: path.join(out, `${name}.tif`) },
      'r1',
      roots,
    );
    const store = new TileStore(plan.storeRoot);
    const tiles: {
      i: number;
      z: number;
      x: number;
      y: number;
      status: 'ok';
      reason: string;
      attempts: number;
      pass: number;
      path: string;
    }[] = [];
    for (let i = 0; i < plan.total; i++) {
      const { z, x, y } = tileOf(plan.grid, i);
      const put = await store.put(plan.sourceName, { z, x, y }, await gradientImage(256, 256), meta());
      tiles.push({ i, z, x, y, status: 'ok' as const, reason: 'ok', attempts: 1, pass: 0, path: put.path });
    }
    await writeJournal(plan.journalDir, { batchId: 'p0-b-0', pass: 0, writtenAt: Date.now(), tiles });
    const outsideImage = path.join(elsewhere, `${name}-outside.png`);
    const outsideBytes = await gradientImage(256, 256, 'png', 9);
    writeFileSync(outsideImage, outsideBytes);
    const swap = () => {
      rmSync(tiles[0]!.path);
      symlinkSync(outsideImage, tiles[0]!.path);
    };
    return { plan, tiles, outsideBytes, swap };
  }

  /** Runs the real tile check, then `after` (the swap), as if it happened between the check and the read. */
  function swapAfterCheck(t: TestContext, then: () => void) {
    const check = tileFiles.confineTileFiles;
    t.mock.method(tileFiles, 'confineTileFiles', async (...args: Parameters<typeof check>) => {
      const checked = await check(...args);
      then();
      return checked;
    });
  }

  test('a tile swapped for a symlink between the check and the pack is not packed: counted missing', async (t) => {
    const { plan, outsideBytes, swap } = await storedLevel('pack');
    assert.ok(plan.total > 1, `${plan.total} tiles`);
    swapAfterCheck(t, swap);
    const into = path.join(out, 'pack.mbtiles');
    const result = await packMbtiles({ into, outputs: [plan.output], name: 'pack' }, roots);
    assert.deepEqual([result.tiles, result.missing], [plan.total - 1, 1]);
    const db = new Database(into, { readonly: true });
    try {
      const packed = db.prepare('SELECT tile_data FROM tiles').all() as { tile_data: Buffer }[];
      assert.equal(packed.length, plan.total - 1);
      assert.ok(packed.every((r) => !Buffer.from(r.tile_data).equals(outsideBytes)));
    } finally {
      db.close();
    }
  });

  test('a tile swapped for a symlink between the check and the stitch is not drawn: the assembly fails, its retry records the tile failed', async (t) => {
    const { plan, tiles, swap } = await storedLevel('stitch');
    swapAfterCheck(t, swap);
    const rel = `inline/${tiles[0]!.z}/${tiles[0]!.x}/${tiles[0]!.y}.png`;
    await assert.rejects(
      assembleMosaic({ plan, partial: false }, roots),
      (err: Error) =>
        err instanceof StoreEscapeError && err.message.endsWith(`tile store: ${rel} is a symlink; not read`),
    );
    assert.ok(!existsSync(plan.output), 'no image drawn');
    const manifestFile = plan.output.replace(/\.tif$/, '.manifest.json');
    const first = JSON.parse(readFileSync(manifestFile, 'utf8')) as { image: string };
    assert.match(first.image, /^not written: .*is a symlink; not read$/);
    t.mock.restoreAll();
    const retried = await assembleMosaic({ plan, partial: false }, roots);
    const manifest = JSON.parse(readFileSync(retried.manifest, 'utf8')) as {
      image: string;
      tiles: { status: string; reason: string }[];
    };
    assert.deepEqual(
      [manifest.image, manifest.tiles[0]!.status, manifest.tiles[0]!.reason],
      ['written', 'failed', `tile store: ${rel} is a symlink; not read`],
    );
  });

  test('readConfinedFile reads a regular file inside the root; a symlink, a FIFO or a folder linked outside is refused without its content', async () => {
    const a = storeDir();
    mkdirSync(path.join(a, 'osm', '3', '4'), { recursive: true });
    writeFileSync(path.join(a, 'osm', '3', '4', '1.png'), 'tile');
    assert.equal((await readConfinedFile(path.join(a, 'osm', '3', '4', '1.png'), a)).toString(), 'tile');
    const refused = async (file: string, message: string) => {
      const err = await readConfinedFile(file, a).then(
        () => assert.fail(`${file} was read`),
        (e: Error) => e,
      );
      assert.ok(err instanceof StoreEscapeError, err.message);
      assert.equal(err.message, message);
      assert.ok(!err.message.includes(CANARY));
    };
    symlinkSync(secret, path.join(a, 'osm', '3', '4', '2.png'));
    await refused(path.join(a, 'osm', '3', '4', '2.png'), 'tile store: osm/3/4/2.png is a symlink; not read');
    // A FIFO would hold an ordinary open until someone writes to it.
    execFileSync('mkfifo', [path.join(a, 'osm', '3', '4', '3.png')]);
    await refused(path.join(a, 'osm', '3', '4', '3.png'), 'tile store: osm/3/4/3.png is not a regular file; not read');
    symlinkSync(elsewhere, path.join(a, 'osm', '3', '5'));
    await refused(
      path.join(a, 'osm', '3', '5', 'secret.txt'),
      'tile store: osm/3/5 leads outside the store through a symlink; not used',
    );
  });
});
