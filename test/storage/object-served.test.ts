import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ObjectTileStore } from '../../src/activities/tile-store/object-tile-store';
import { shapeKey } from '../../src/activities/validate/shape-memory';
import { packageRoot } from '../../src/client/local-server';
import { startLocalS3, type LocalS3 } from '../../src/demo/s3-server';

// Only the S3 server (no Temporal): the served-shape records of a tile store in a bucket.
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-s3-served-'));
let s3: LocalS3;

before(async () => {
  s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(dir, 's3'), bucket: 'mosaics' });
});
after(async () => {
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('a tile store in a bucket records served shapes as one small object per shape, named by its hash', async () => {
  const store = new ObjectTileStore('s3://mosaics/store', s3.client);
  const shape = 'wms http://maps.example/wms?LAYERS=roads&api_key=SECRET123';
  const key = shapeKey(shape);
  const T = 1_800_000_000_000;
  assert.equal(await store.servedAt('osm', key), null);
  await store.markServed('osm', key, T);
  assert.equal(await store.servedAt('osm', key), T);
  await store.markServed('osm', key, T + 60_000);
  assert.equal(await store.servedAt('osm', key), T + 60_000, 'a later mark replaces the earlier one');
  assert.equal(await store.servedAt('osm', shapeKey('another shape')), null);
  assert.equal(
    await new ObjectTileStore('s3://mosaics/elsewhere', s3.client).servedAt('osm', key),
    null,
    'per store prefix',
  );
  const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: 'mosaics', Prefix: 'store/' }));
  assert.deepEqual(
    listed.Contents?.map((o) => o.Key),
    [`store/osm/.served/${key}`],
  );
  const body = await (
    await s3.client.send(new GetObjectCommand({ Bucket: 'mosaics', Key: `store/osm/.served/${key}` }))
  ).Body!.transformToString();
  assert.doesNotMatch(body, /SECRET123|maps\.example/);
  await assert.rejects(store.markServed('osm', 'not-a-hash', T), /shapeKey must be a sha256 hex digest/);
  await assert.rejects(store.servedAt('../x', key), /tile store: source name/);
});
