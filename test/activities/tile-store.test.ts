import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { StoreEscapeError } from '../../src/activities/tile-store/store-bounds';
import { atomicWrite, TileStore } from '../../src/activities/tile-store/tile-store';
import { shapeKey } from '../../src/activities/validate/shape-memory';
import { gradientImage } from '../helpers/images';

const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-tile-store-'));
after(() => rmSync(root, { recursive: true, force: true }));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('the tile store', () => {
  test('a tile without validators is one file; its metadata is read from the file itself', async () => {
    const store = new TileStore(root);
    const body = await gradientImage(256, 256);
    const before = Date.now();
    const put = await store.put('plain', { z: 3, x: 1, y: 2 }, body, {
      fetchedAt: Date.now(),
      contentType: 'image/png',
    });
    assert.deepEqual(readdirSync(path.dirname(put.path)), ['2.png']);
    const got = await store.get('plain', { z: 3, x: 1, y: 2 });
    assert.equal(got?.path, put.path);
    assert.equal(got?.meta.sha256, sha(body));
    assert.equal(got?.meta.bytes, body.length);
    assert.equal(got?.meta.contentType, 'image/png');
    assert.deepEqual([got?.meta.width, got?.meta.height], [256, 256]);
    assert.ok(
      got.meta.fetchedAt >= before - 1_000 && got.meta.fetchedAt <= Date.now() + 1_000,
      `fetchedAt ${got.meta.fetchedAt}`,
    );
    assert.equal(got?.meta.etag, undefined);
    assert.equal(await store.get('plain', { z: 3, x: 1, y: 3 }), null);
  });

  test('validators and a back-dated fetchedAt are kept in a sidecar, which always describes the tile beside it', async () => {
    const store = new TileStore(root);
    const t = { z: 3, x: 4, y: 5 };
    const v1 = await gradientImage(256, 256, 'png', 1);
    await store.put('validated', t, v1, {
      fetchedAt: Date.now(),
      contentType: 'image/png',
      etag: '"v1"',
      lastModified: 'Sun, 01 Nov 2026 00:00:00 GMT',
    });
    let got = await store.get('validated', t);
    assert.deepEqual(
      [got?.meta.etag, got?.meta.lastModified, got?.meta.sha256],
      ['"v1"', 'Sun, 01 Nov 2026 00:00:00 GMT', sha(v1)],
    );
    // The server stops sending validators: the old sidecar must not describe the new copy.
    const v2 = await gradientImage(256, 256, 'png', 2);
    await store.put('validated', t, v2, { fetchedAt: Date.now(), contentType: 'image/png' });
    got = await store.get('validated', t);
    assert.equal(got?.meta.etag, undefined);
    assert.equal(got?.meta.sha256, sha(v2));
    // Even the same bytes again, fetched without validators: the old ETag is not theirs to claim.
    await store.put('validated', t, v1, { fetchedAt: Date.now(), contentType: 'image/png', etag: '"v1"' });
    // A second later (within the same second the same bytes keep their sidecar, whose validators then still
    // describe exactly those bytes).
    await new Promise((r) => setTimeout(r, 1_100));
    await store.put('validated', t, v1, { fetchedAt: Date.now(), contentType: 'image/png' });
    assert.ok(
      existsSync(path.join(store.dir('validated', t), '5.json')),
      'the old sidecar is left, not removed at every write',
    );
    got = await store.get('validated', t);
    assert.deepEqual([got?.meta.etag, got?.meta.sha256], [undefined, sha(v1)]);
    // An imported copy keeps the time it was fetched, not the time it was written.
    const old = Date.UTC(2026, 0, 2);
    await store.put('validated', t, v1, { fetchedAt: old, contentType: 'image/png' });
    got = await store.get('validated', t);
    assert.deepEqual([got?.meta.fetchedAt, got?.meta.sha256], [old, sha(v1)]);
  });

  test('a tile whose server sent another format than the source says is found, and the newest copy wins', async () => {
    const store = new TileStore(root);
    const t = { z: 1, x: 0, y: 0 };
    const png = await gradientImage(256, 256, 'png');
    await store.put('mixed', t, png, { fetchedAt: Date.now(), contentType: 'image/png' });
    await new Promise((r) => setTimeout(r, 20));
    const jpeg = await gradientImage(256, 256, 'jpeg');
    await store.put('mixed', t, jpeg, { fetchedAt: Date.now(), contentType: 'image/jpeg' });
    let got = await store.get('mixed', t);
    assert.equal(path.basename(got!.path), '0.jpg');
    assert.deepEqual([got?.meta.contentType, got?.meta.sha256], ['image/jpeg', sha(jpeg)]);
    await new Promise((r) => setTimeout(r, 20));
    await store.put('mixed', t, png, { fetchedAt: Date.now(), contentType: 'image/png' });
    got = await store.get('mixed', t);
    assert.deepEqual([path.basename(got!.path), got?.meta.sha256], ['0.png', sha(png)]);
  });

  test('a copy restored with its modification time cut to the second (tar, cp) keeps its sidecar', async () => {
    const store = new TileStore(root);
    const t = { z: 2, x: 3, y: 3 };
    const body = await gradientImage(256, 256, 'png', 9);
    const put = await store.put('restored', t, body, { fetchedAt: Date.now(), contentType: 'image/png', etag: '"r"' });
    const { mtimeMs } = statSync(put.path);
    utimesSync(put.path, new Date(), new Date(Math.floor(mtimeMs / 1000) * 1000));
    assert.equal((await store.get('restored', t))?.meta.etag, '"r"');
  });

  test('a new format for a tile replaces the old file, whoever writes it, even within one clock tick', async () => {
    const t = { z: 4, x: 2, y: 7 };
    const png = await gradientImage(256, 256, 'png', 3);
    const jpeg = await gradientImage(256, 256, 'jpeg', 3);
    await new TileStore(root).put('formats', t, png, { fetchedAt: Date.now(), contentType: 'image/png' });
    // Another worker's store, at once.
    await new TileStore(root).put('formats', t, jpeg, { fetchedAt: Date.now(), contentType: 'image/jpeg' });
    const store = new TileStore(root);
    assert.deepEqual(readdirSync(store.dir('formats', t)).sort(), ['7.jpg']);
    assert.equal((await store.get('formats', t))?.meta.sha256, sha(jpeg));
    // The same store, twice in a folder it made.
    const u = { z: 4, x: 3, y: 1 };
    await store.put('formats', u, png, { fetchedAt: Date.now(), contentType: 'image/png' });
    await store.put('formats', u, jpeg, { fetchedAt: Date.now(), contentType: 'image/jpeg' });
    assert.deepEqual(readdirSync(store.dir('formats', u)).sort(), ['1.jpg']);
  });

  test('something that is not a file where a tile could be is passed over', async () => {
    const store = new TileStore(root);
    const t = { z: 5, x: 5, y: 5 };
    const png = await gradientImage(256, 256, 'png', 4);
    await store.put('odd', t, png, { fetchedAt: Date.now(), contentType: 'image/png' });
    mkdirSync(path.join(store.dir('odd', t), '5.webp'));
    utimesSync(path.join(store.dir('odd', t), '5.webp'), new Date(), new Date(Date.now() + 60_000));
    assert.equal((await store.get('odd', t))?.meta.sha256, sha(png));
  });

  test('a sidecar that does not describe the file beside it (two writers interleaved) is not believed', async () => {
    const store = new TileStore(root);
    const t = { z: 2, x: 1, y: 1 };
    const a = await gradientImage(256, 256, 'png', 5);
    const b = await gradientImage(256, 256, 'png', 6);
    await store.put('raced', t, a, { fetchedAt: Date.now(), contentType: 'image/png', etag: '"a"' });
    // Writer B's tile lands after writer A's sidecar.
    await atomicWrite(path.join(store.dir('raced', t), '1.png'), b);
    const got = await store.get('raced', t);
    assert.equal(got?.meta.etag, undefined, 'no ETag of another copy');
    assert.equal(got?.meta.sha256, sha(b));
  });

  test('a served shape is one small file per shape under the source, named by its hash: never the shape itself', async () => {
    const store = new TileStore(root);
    const shape = 'xyz https://tiles.example/{z}/{x}/{y}.png?key=SECRET123';
    const key = shapeKey(shape);
    const T = 1_800_000_000_000;
    assert.equal(await store.servedAt('marks', key), null, 'nothing recorded yet (no folder either)');
    await store.markServed('marks', key, T);
    assert.equal(await store.servedAt('marks', key), T);
    await store.markServed('marks', key, T + 3_600_000);
    assert.equal(await store.servedAt('marks', key), T + 3_600_000, 'a later mark replaces the earlier one');
    const dir = path.join(root, 'marks', '.served');
    assert.deepEqual(readdirSync(dir), [key], 'one file, no temporary left behind');
    assert.doesNotMatch(readFileSync(path.join(dir, key), 'utf8'), /SECRET123|tiles\.example/);
    assert.equal(await store.servedAt('marks', shapeKey('another shape')), null);
    assert.equal(await store.servedAt('other-source', key), null, 'per source');
    // A record torn by hand says nothing.
    writeFileSync(path.join(dir, key), '{"servedAt":');
    assert.equal(await store.servedAt('marks', key), null);
  });

  test('served records: a key that is not a sha256 hex, or a source name that is a path, is refused; a symlinked records folder is not followed', async () => {
    const store = new TileStore(root);
    await assert.rejects(store.markServed('marks', '../../etc/passwd', 1), /shapeKey must be a sha256 hex digest/);
    await assert.rejects(store.servedAt('marks', 'A'.repeat(64)), /shapeKey must be a sha256 hex digest/);
    await assert.rejects(store.markServed('..', shapeKey('s'), 1), /tile store: source name/);
    const outside = mkdtempSync(path.join(tmpdir(), 'tilebreaker-outside-'));
    try {
      mkdirSync(path.join(root, 'linked'));
      symlinkSync(outside, path.join(root, 'linked', '.served'));
      await assert.rejects(store.markServed('linked', shapeKey('s'), 1), StoreEscapeError);
      await assert.rejects(store.servedAt('linked', shapeKey('s')), StoreEscapeError);
      assert.deepEqual(readdirSync(outside), []);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
