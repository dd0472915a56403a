import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Client } from '@temporalio/client';
import { compareReleases, promoteWhenPolling } from '../../src/client/versioning';

// promoteWhenPolling against a fake workflow service: what the server says, in order, and what it was asked to do.

const QUEUES = { workflow: ['tq'], activity: ['tq', 'tq-fetch'] };
const POLLED = [
  { type: 1, name: 'tq' },
  { type: 2, name: 'tq' },
  { type: 2, name: 'tq-fetch' },
];

interface Summary {
  buildId: string;
  /** When the server first saw the build (seconds). */
  created: number;
  status?: number;
}

/** A deployment whose current version is `current` and whose summaries are `summaries(n)` at the n-th read. */
function fakeClient(current: string | null, summaries: (n: number) => Summary[]) {
  const set: { buildId: string }[] = [];
  let reads = 0;
  const client = {
    options: { namespace: 'default' },
    workflowService: {
      describeWorkerDeploymentVersion: () =>
        Promise.resolve({ workerDeploymentVersionInfo: { taskQueueInfos: POLLED } }),
      describeWorkerDeployment: () =>
        Promise.resolve({
          conflictToken: new Uint8Array([1]),
          workerDeploymentInfo: {
            routingConfig: current === null ? {} : { currentDeploymentVersion: { buildId: current } },
            versionSummaries: summaries(reads++).map((s) => ({
              deploymentVersion: { buildId: s.buildId },
              createTime: { seconds: s.created, nanos: 0 },
              status: s.status ?? 1,
            })),
          },
        }),
      setWorkerDeploymentCurrentVersion: (req: { buildId: string }) => {
        set.push({ buildId: req.buildId });
        return Promise.resolve({});
      },
    },
  } as unknown as Client;
  return { client, set, reads: () => reads };
}

const v = (buildId: string) => ({ deploymentName: 'tq', buildId });

test('promotion: a build not yet listed in the deployment summary is looked for again, then promoted over an older release', async () => {
  const current = { buildId: '0.1.0+aaaaaaaaaaaa', created: 100, status: 2 };
  // The summary lags: the new build is listed only from the third read.
  const f = fakeClient(current.buildId, (n) =>
    n < 2 ? [current] : [current, { buildId: '0.2.0+bbbbbbbbbbbb', created: 200 }],
  );
  const outcome = await promoteWhenPolling(f.client, v('0.2.0+bbbbbbbbbbbb'), QUEUES, { timeoutMs: 60_000 });
  assert.deepEqual(outcome, { promoted: true, previous: '0.1.0+aaaaaaaaaaaa' });
  assert.deepEqual(f.set, [{ buildId: '0.2.0+bbbbbbbbbbbb' }]);
  assert.equal(f.reads(), 3);
});

test('promotion: a build never listed gives up at the timeout, saying why', async () => {
  const f = fakeClient('0.1.0+aaaaaaaaaaaa', () => [{ buildId: '0.1.0+aaaaaaaaaaaa', created: 100, status: 2 }]);
  const outcome = await promoteWhenPolling(f.client, v('0.2.0+bbbbbbbbbbbb'), QUEUES, { timeoutMs: 1_200 });
  assert.deepEqual(outcome, {
    promoted: false,
    why: 'timed out',
    lastError: 'build 0.2.0+bbbbbbbbbbbb is not yet listed in deployment tq',
  });
  assert.deepEqual(f.set, []);
});

test('promotion: an older release that the server first saw after the current one does not take over; a newer one first seen before it does', async () => {
  const newer = { buildId: '0.2.0+bbbbbbbbbbbb', created: 100, status: 2 };
  const old = fakeClient(newer.buildId, () => [newer, { buildId: '0.1.0+aaaaaaaaaaaa', created: 200 }]);
  assert.deepEqual(await promoteWhenPolling(old.client, v('0.1.0+aaaaaaaaaaaa'), QUEUES, { timeoutMs: 60_000 }), {
    promoted: false,
    why: 'newer current',
  });
  assert.deepEqual(old.set, []);
  const next = fakeClient(newer.buildId, () => [newer, { buildId: '0.3.0+cccccccccccc', created: 50 }]);
  assert.deepEqual(await promoteWhenPolling(next.client, v('0.3.0+cccccccccccc'), QUEUES, { timeoutMs: 60_000 }), {
    promoted: true,
    previous: newer.buildId,
  });
});

test('promotion: two builds of one version, or build ids without a version, are left to the operator', async () => {
  const current = { buildId: '0.2.0+bbbbbbbbbbbb', created: 100, status: 2 };
  const rebuild = fakeClient(current.buildId, () => [current, { buildId: '0.2.0+dddddddddddd', created: 200 }]);
  assert.deepEqual(await promoteWhenPolling(rebuild.client, v('0.2.0+dddddddddddd'), QUEUES, { timeoutMs: 60_000 }), {
    promoted: false,
    why: 'not newer',
  });
  const ci = fakeClient('ci-41', () => [
    { buildId: 'ci-41', created: 100, status: 2 },
    { buildId: 'ci-42', created: 200 },
  ]);
  assert.deepEqual(await promoteWhenPolling(ci.client, v('ci-42'), QUEUES, { timeoutMs: 60_000 }), {
    promoted: false,
    why: 'not newer',
  });
  assert.deepEqual([...rebuild.set, ...ci.set], []);
  // From unversioned workers (the release before versioning) any build that never was current takes over.
  const first = fakeClient(null, () => [{ buildId: 'ci-42', created: 200 }]);
  assert.deepEqual(await promoteWhenPolling(first.client, v('ci-42'), QUEUES, { timeoutMs: 60_000 }), {
    promoted: true,
    previous: 'unversioned',
  });
});

test('compareReleases: by semantic-version precedence of the package version before the +', () => {
  assert.ok(compareReleases('0.10.0+a', '0.9.0+b')! > 0);
  assert.ok(compareReleases('1.0.0-rc.1+a', '1.0.0+b')! < 0);
  assert.ok(compareReleases('1.0.0-rc.2', '1.0.0-rc.10')! < 0);
  assert.ok(compareReleases('1.0.0-alpha', '1.0.0-alpha.1')! < 0);
  assert.ok(compareReleases('1.0.0-1', '1.0.0-alpha')! < 0);
  assert.equal(compareReleases('0.2.0+a', '0.2.0+b'), 0);
  assert.equal(compareReleases('ci-42', '0.2.0+b'), null);
});
