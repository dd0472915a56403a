/**
 * Object storage across releases: the release before it (built from git) must refuse what this release makes
 * for an `s3://` output, a request from this release's client and a plan from its planner, instead of taking
 * `s3://bucket/x.tif` for a relative path and writing local files; and must still accept this release's
 * requests and plans for a local output. This release refuses a capability it does not know (a later
 * release's), so the rule carries forward.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, test } from 'node:test';
import { resolveRequestPaths } from '../../src/client/mosaics';
import { checkPlan } from '../../src/messages/plan-check';
import { parseMosaicRequest } from '../../src/messages/mosaic-request';
import type { MosaicPlan, MosaicRequest } from '../../src/messages/mosaic-types';
import { buildRelease, PREVIOUS_RELEASE, type ReleaseBuild } from '../helpers/previous-release';

let previous: ReleaseBuild;
let old: { parseMosaicRequest: (r: unknown) => unknown; checkPlan: (p: unknown, subject: string) => unknown };
before(() => {
  previous = buildRelease(PREVIOUS_RELEASE);
  const dist = path.join(previous.dir, 'dist', 'src', 'messages');
  /* eslint-disable @typescript-eslint/no-require-imports -- the previous release is loaded from its own build */
  old = {
    ...(require(path.join(dist, 'mosaic-request.js')) as Pick<typeof old, 'parseMosaicRequest'>),
    ...(require(path.join(dist, 'plan-check.js')) as Pick<typeof old, 'checkPlan'>),
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
});

const request = (output: string): MosaicRequest => ({
  source: { type: 'xyz', url: 'https://tiles.example.com/{z}/{x}/{y}.png' },
  sourceName: 'demo',
  bbox: [5, 45, 6, 46],
  zoom: 8,
  output,
});

function plan(output: string, extra: Partial<MosaicPlan> = {}): MosaicPlan {
  const base = output.replace(/\.tif$/, '');
  return {
    sourceName: 'demo',
    source: { type: 'xyz', url: 'https://tiles.example.com/{z}/{x}/{y}.png', tileSize: 256 } as MosaicPlan['source'],
    grid: { z: 8, tileSize: 256, xMin: 130, xMax: 131, yMin: 90, yMax: 91 },
    total: 4,
    bounds: { minX: 0, minY: 0, maxX: 1, maxY: 1 },
    output,
    extraFormats: [],
    workDir: `${base}.work`,
    journalDir: `${base}.work/journal-r1`,
    storeRoot: `${base}.tiles`,
    fallback: 'fail-fast',
    afterDeadline: 'fail-fast',
    deadlineAt: null,
    batchSize: 256,
    blockTiles: 16_384,
    parallelBatches: 4,
    breaker: true,
    ...extra,
  };
}

test('a request for an s3:// output names object-storage, and the previous release refuses it; a local one is unchanged and accepted', () => {
  const s3 = resolveRequestPaths(request('s3://maps/nightly/alps.tif'));
  assert.deepEqual(s3.requires, ['object-storage']);
  assert.throws(
    () => old.parseMosaicRequest(s3),
    /requires/,
    `the previous release (${previous.commit.slice(0, 7)}) refuses it`,
  );
  assert.doesNotThrow(() => parseMosaicRequest(s3));
  const local = resolveRequestPaths(request('/data/alps.tif'));
  assert.equal('requires' in local, false);
  assert.doesNotThrow(() => old.parseMosaicRequest(local));
});

test('a plan with s3:// locations names object-storage, and the previous release refuses it; a local plan is accepted by both', () => {
  const s3 = plan('s3://maps/nightly/alps.tif', { requires: ['object-storage'] });
  assert.doesNotThrow(() => checkPlan(s3, 'plan'));
  assert.throws(() => old.checkPlan(s3, 'plan'), /requires/);
  const local = plan('/data/alps.tif');
  assert.doesNotThrow(() => checkPlan(local, 'plan'));
  assert.doesNotThrow(() => old.checkPlan(local, 'plan'));
});

test('this release refuses a capability it does not know, in a request and in a plan', () => {
  assert.throws(
    () => parseMosaicRequest({ ...request('/data/alps.tif'), requires: ['batch-checkpoints'] }),
    /requires/,
  );
  assert.throws(() => checkPlan({ ...plan('/data/alps.tif'), requires: ['batch-checkpoints'] }, 'plan'), /requires/);
});
