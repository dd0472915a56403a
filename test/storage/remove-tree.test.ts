import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DeleteObjectsCommand,
  ListObjectsV2Command,
  type DeleteObjectsCommandOutput,
  type ListObjectsV2CommandOutput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { objectStorage } from '../../src/activities/storage/storage';

/** An S3 client that answers listings and deletes as `answer` says, and counts the listings. */
function fakeS3(answer: {
  list: () => Partial<ListObjectsV2CommandOutput>;
  delete: (keys: string[]) => Partial<DeleteObjectsCommandOutput>;
}) {
  const calls = { list: 0, delete: 0 };
  const client = {
    send(cmd: unknown) {
      if (cmd instanceof ListObjectsV2Command) {
        // The code before the guard listed for ever: fail loudly instead of hanging the test.
        if (++calls.list > 50)
          return Promise.reject(Object.assign(new Error('listed 50 times'), { name: 'EndlessListing' }));
        return Promise.resolve(answer.list());
      }
      if (cmd instanceof DeleteObjectsCommand) {
        calls.delete++;
        return Promise.resolve(answer.delete((cmd.input.Delete?.Objects ?? []).map((o) => o.Key!)));
      }
      return Promise.reject(new Error('unexpected command'));
    },
  };
  return { storage: objectStorage(client as unknown as S3Client), calls };
}

const journal = (n: number) => `nightly/alps.work/journal-old/p0-b${n}-0.json`;

test('removing a bucket prefix whose keys the server could not delete fails, naming the prefix and how many keys, not the keys', async () => {
  const keys = [0, 1, 2].map(journal);
  const { storage, calls } = fakeS3({
    list: () => ({ Contents: keys.map((Key) => ({ Key })), IsTruncated: false }),
    delete: (ks) => ({
      Errors: ks.slice(1).map((Key) => ({ Key, Code: 'AccessDenied', Message: `no access to ${Key}` })),
    }),
  });
  await assert.rejects(storage.removeTree('s3://mosaics/nightly/alps.work/journal-old'), (err: Error) => {
    assert.equal(
      err.message,
      'storage: cannot remove s3://mosaics/nightly/alps.work/journal-old (2 of 3 keys could not be removed: AccessDenied)',
    );
    return true;
  });
  assert.deepEqual(calls, { list: 1, delete: 1 });
});

test('removing a bucket prefix whose listing keeps the same keys after they were deleted stops with an error instead of looping', async () => {
  const keys = Array.from({ length: 1_000 }, (_, n) => journal(n));
  const { storage, calls } = fakeS3({
    // A page of keys the server says it deleted, listed again every time, with more behind it.
    list: () => ({ Contents: keys.map((Key) => ({ Key })), IsTruncated: true }),
    delete: () => ({}),
  });
  await assert.rejects(storage.removeTree('s3://mosaics/nightly/alps.work/journal-old'), (err: Error) => {
    assert.equal(
      err.message,
      'storage: cannot remove s3://mosaics/nightly/alps.work/journal-old (1000 keys still listed after they were deleted)',
    );
    return true;
  });
  assert.deepEqual(calls, { list: 2, delete: 1 });
});

test('removing a bucket prefix deletes page after page until the listing is empty', async () => {
  const left = Array.from({ length: 2_500 }, (_, n) => journal(n));
  const { storage, calls } = fakeS3({
    list: () => ({ Contents: left.slice(0, 1_000).map((Key) => ({ Key })), IsTruncated: left.length > 1_000 }),
    delete: (ks) => {
      left.splice(0, ks.length);
      return {};
    },
  });
  await storage.removeTree('s3://mosaics/nightly/alps.work/journal-old');
  assert.equal(left.length, 0);
  assert.deepEqual(calls, { list: 3, delete: 3 });
});

test('removing listed bucket files fails naming their prefix and the count when the server keeps some', async () => {
  const { storage, calls } = fakeS3({
    list: () => ({}),
    delete: (ks) => ({ Errors: [{ Key: ks[0], Code: 'AccessDenied' }] }),
  });
  const files = [0, 1].map(
    (n) => `s3://mosaics/nightly/alps.work/journal-run/p0-b0-0.checkpoint/1000-aaaaaaaa-00000${n}.jsonl`,
  );
  await assert.rejects(storage.remove(files), {
    message:
      'storage: cannot remove s3://mosaics/nightly/alps.work/journal-run/p0-b0-0.checkpoint (1 of 2 keys could not be removed: AccessDenied)',
  });
  assert.deepEqual(calls, { list: 0, delete: 1 });
});
