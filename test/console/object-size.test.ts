import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import sharp from 'sharp';
import { objectStorage, type Storage } from '../../src/activities/storage/storage';
import { packageRoot } from '../../src/client/local-server';
import { MosaicsView } from '../../src/console/mosaics-view';
import { useS3Env } from '../helpers/s3-env';
import { startLocalS3, type LocalS3 } from '../../src/demo/s3-server';

// The console's reads of a mosaic in a bucket, on the S3 test server: sizes checked before reading, previews
// keyed by what the object is now.

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-console-s3-'));
let s3: LocalS3;
let restoreEnv: () => void = () => undefined;

before(async () => {
  s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(dir, 's3'), bucket: 'mosaics' });
  // The console's own S3 client reads the AWS SDK's variables, as on a console host.
  restoreEnv = useS3Env(s3.env);
});
after(async () => {
  restoreEnv();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const ROOTS = { sources: [dir], outputs: [dir], buckets: ['s3://mosaics/console'] };

/** A finished mosaic whose result names `manifest`, as mosaicStatus reads it. */
const finished = (manifest: string) =>
  ({
    workflow: {
      getHandle: () => ({
        describe: () => Promise.resolve({ status: { name: 'COMPLETED' }, runId: 'run-1' }),
        query: () => Promise.reject(new Error('no query here')),
        result: () => Promise.resolve({ manifest }),
      }),
    },
  }) as unknown as Client;

/** The bucket's storage, counting the whole reads of each key. */
function counted(): { storage: Storage; reads: Map<string, number> } {
  const inner = objectStorage(s3.client);
  const reads = new Map<string, number>();
  return {
    reads,
    storage: {
      ...inner,
      read: (loc) => {
        reads.set(loc, (reads.get(loc) ?? 0) + 1);
        return inner.read(loc);
      },
    },
  };
}

const put = (key: string, body: Buffer) =>
  s3.client.send(new PutObjectCommand({ Bucket: 'mosaics', Key: key, Body: body }));
const png = (r: number, g: number, b: number) =>
  sharp({ create: { width: 8, height: 8, channels: 3, background: { r, g, b } } })
    .png()
    .toBuffer();
const manifest = (image: string) =>
  Buffer.from(
    JSON.stringify({
      grid: { cols: 1, rows: 1, tileSize: 8 },
      width: 8,
      height: 8,
      files: [image],
      tiles: [{ i: 0, z: 0, x: 0, y: 0, status: 'ok' }],
    }),
  );

test("the console's object size: an image in a bucket over the bound is refused before it is read, naming it, its size and the bound", async () => {
  // Noise: a PNG that does not compress below the bound (about 12 KB).
  const noise = await sharp(randomBytes(64 * 64 * 3), { raw: { width: 64, height: 64, channels: 3 } })
    .png()
    .toBuffer();
  await put('console/big.png', noise);
  await put('console/big.manifest.json', manifest('s3://mosaics/console/big.png'));
  assert.ok(noise.length > 1_000, `${noise.length} bytes`);
  const { storage, reads } = counted();
  const view = new MosaicsView(finished('s3://mosaics/console/big.manifest.json'), ROOTS, {
    storage: () => storage,
    maxImageBytes: 1_000,
  });
  await assert.rejects(view.preview('mosaic/big'), {
    message: `big.png is ${noise.length} bytes, more than the console reads (1000)`,
  });
  assert.equal(reads.get('s3://mosaics/console/big.png') ?? 0, 0, 'the image was not read');
});

test("the console's object size: a preview in a bucket follows the object, so a re-drive's new image shows", async () => {
  await put('console/redriven.png', await png(255, 0, 0));
  await put('console/redriven.manifest.json', manifest('s3://mosaics/console/redriven.png'));
  const view = new MosaicsView(finished('s3://mosaics/console/redriven.manifest.json'), ROOTS);
  const pixel = async () => [
    ...(
      await sharp(await view.preview('mosaic/redriven'))
        .raw()
        .toBuffer()
    ).subarray(0, 3),
  ];
  assert.deepEqual(await pixel(), [255, 0, 0]);
  // The same key rewritten, as a re-drive's assembly does.
  await put('console/redriven.png', await png(0, 0, 255));
  assert.deepEqual(await pixel(), [0, 0, 255]);
});
