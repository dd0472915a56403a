import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { preflight } from '../../src/cli/preflight';
import { mosaicWorkflowId, normalLocation } from '../../src/client/mosaic-names';
import { resolveRequestPaths } from '../../src/client/mosaics';
import { prepareSeed, seedWorkflowId } from '../../src/client/seeds';
import type { MosaicRequest } from '../../src/messages/mosaic-types';

const request: MosaicRequest = {
  sourcesFile: 'conf/sources.yaml',
  sourceName: 'osm',
  bbox: [5.7, 44, 19.5, 49.9],
  zoom: 7,
  output: 'out/alps.tif',
};

test('a relative sourcesFile is sent as written, for the worker to read from its own sources root; the output is resolved here', () => {
  const r = resolveRequestPaths(request, '/home/ops');
  assert.equal(r.sourcesFile, 'conf/sources.yaml');
  assert.equal(r.output, '/home/ops/out/alps.tif');
  // An absolute one is left as it is too.
  assert.equal(
    resolveRequestPaths({ ...request, sourcesFile: '/config/sources.yaml' }, '/home/ops').sourcesFile,
    '/config/sources.yaml',
  );
  assert.equal(
    prepareSeed({
      sourcesFile: 'conf/sources.yaml',
      sourceName: 'osm',
      bbox: [5.7, 44, 19.5, 49.9],
      levels: [3, 4],
      into: '/data/world.mbtiles',
    }).sourcesFile,
    'conf/sources.yaml',
  );
});

test('preflight of a relative sources file this machine has no copy of: not checked here, and it says so', async () => {
  const notes: string[] = [];
  const missing = { ...request, sourcesFile: 'no-such-folder-here/sources.yaml' };
  assert.equal(await preflight(missing, { note: (l) => notes.push(l) }), 'unchecked');
  assert.equal(notes.length, 1);
  assert.match(
    notes[0]!,
    /^--sources "no-such-folder-here\/sources\.yaml": no copy on this machine, so the request was not checked here; the workers read it from their first sources root/,
  );
  // An absolute path this machine lacks is still refused: it names the same file on every host.
  await assert.rejects(
    preflight({ ...request, sourcesFile: '/no-such-folder-here/sources.yaml' }, { note: (l) => notes.push(l) }),
    /--sources "\/no-such-folder-here\/sources\.yaml": no such file on this machine/,
  );
});

test('two spellings of one output give one mosaic id, for local paths and s3 keys alike', () => {
  assert.equal(
    mosaicWorkflowId(path.resolve('out/a.tif')),
    mosaicWorkflowId(resolveRequestPaths({ ...request, output: './out/../out/a.tif' }).output),
  );
  assert.equal(normalLocation('s3://tiles/nightly/../nightly//./alps.tif'), 's3://tiles/nightly/alps.tif');
  assert.equal(
    mosaicWorkflowId('s3://tiles/nightly/../nightly//./alps.tif'),
    mosaicWorkflowId('s3://tiles/nightly/alps.tif'),
  );
  assert.equal(
    resolveRequestPaths({ ...request, output: 's3://tiles/a/./b/../alps.tif' }).output,
    's3://tiles/a/alps.tif',
  );
  // `..` cannot climb out of the bucket.
  assert.equal(normalLocation('s3://tiles/../../alps.tif'), 's3://tiles/alps.tif');
  const seed = prepareSeed({
    sourcesFile: 's.yaml',
    sourceName: 'osm',
    bbox: [5.7, 44, 19.5, 49.9],
    levels: [3, 3],
    into: 's3://tiles/c/../c/world.mbtiles',
  });
  assert.equal(seedWorkflowId(seed.into), seedWorkflowId('s3://tiles/c/world.mbtiles'));
});

test('already-normal outputs keep the ids they had: existing runs and schedules are still found', () => {
  // Computed by the release before normalisation.
  assert.equal(mosaicWorkflowId('/tmp/x/alps.tif'), 'mosaic/alps-4ca32af6');
  assert.equal(mosaicWorkflowId('s3://b/out/a.tif'), 'mosaic/a-98ffd825');
  assert.equal(normalLocation('s3://b/out/a.tif'), 's3://b/out/a.tif');
  assert.equal(normalLocation('/tmp/x/alps.tif'), '/tmp/x/alps.tif');
  assert.equal(
    seedWorkflowId(
      prepareSeed({
        sourcesFile: 's.yaml',
        sourceName: 'osm',
        bbox: [5.7, 44, 19.5, 49.9],
        levels: [3, 3],
        into: 's3://tiles/c/world.mbtiles',
      }).into,
    ),
    'seed/world-3a3b7c2c',
  );
});
