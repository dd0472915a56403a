import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { isStartupTimeout, withStartRetries } from '../../src/client/server-start';

// The SDK gives an ephemeral server a fixed 5 s to accept connections; on a loaded machine a start that ran out
// of it is tried again (src/client/server-start.ts). A "server" that never listens gives the SDK's real error.

test(
  "a start that ran out of the SDK's 5 s is tried again, up to the attempts given, with the SDK's own error",
  { timeout: 60_000 },
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tb-server-start-'));
    try {
      const count = path.join(dir, 'starts');
      const exe = path.join(dir, 'never-listens');
      writeFileSync(exe, `#!/bin/sh\necho x >> '${count}'\nexit 0\n`);
      chmodSync(exe, 0o755);
      const retries: number[] = [];
      const err = await withStartRetries(
        () =>
          TestWorkflowEnvironment.createLocal({
            server: { executable: { type: 'existing-path', path: exe }, ip: '127.0.0.1' },
          }),
        2,
        (_e, attempt) => retries.push(attempt),
      ).then(
        () => assert.fail('a server that never listens started'),
        (e: unknown) => e,
      );
      assert.ok(isStartupTimeout(err), String(err));
      assert.deepEqual(retries, [1]);
      assert.equal(readFileSync(count, 'utf8').trim().split('\n').length, 2, 'the server was started twice');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('any other error is thrown at once, without a retry', async () => {
  let calls = 0;
  await assert.rejects(
    withStartRetries(() => {
      calls++;
      return Promise.reject(new Error('ephemeral server executable does not exist: /nowhere'));
    }, 3),
    /does not exist/,
  );
  assert.equal(calls, 1);
  // A timeout then a success: the success is returned.
  let n = 0;
  const v = await withStartRetries(() => {
    if (n++ === 0)
      return Promise.reject(
        new Error("ephemeral server at 127.0.0.1:1234 did not start within 5s. Make sure another download isn't stuck"),
      );
    return Promise.resolve('up');
  });
  assert.equal(v, 'up');
});
