import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { preflight } from '../../src/cli/preflight';
import type { MosaicRequest } from '../../src/messages/mosaic-types';

// No Temporal server: a refusal must come before any connection. Port 1 is never a frontend, so a command
// that gets past the check fails on the connection instead, naming this address.
const NOWHERE = '127.0.0.1:1';
const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-sources-missing-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function cli(args: string[], cwd = dir): Promise<{ code: number; out: string; err: string; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { cwd, env: { ...process.env, TEMPORAL_ADDRESS: NOWHERE }, timeout: 60_000 },
      (err, out, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr, ms: Date.now() - t0 }),
    );
  });
}

const area = [
  '--source',
  'osm',
  '--bbox',
  '5.7,44,19.5,49.9',
  '--zoom',
  '7',
  '--out',
  's3://tilebreaker/nightly/alps.tif',
];

test('mosaic start --sources with a file this machine lacks exits 2 at once, naming the flag, the path and the way on', async () => {
  const missing = path.join(dir, 'nope', 'sources.yaml');
  const r = await cli(['mosaic', 'start', '--sources', missing, ...area]);
  assert.equal(r.code, 2, r.err);
  assert.match(
    r.err,
    new RegExp(`--sources "${missing.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}": no such file on this machine`),
  );
  assert.match(r.err, /nothing was started/);
  assert.match(r.err, /add --sources-on-worker with the path as they see it/);
  assert.doesNotMatch(r.err, /127\.0\.0\.1:1/, 'refused before any connection');
});

test('a relative --sources this machine has no copy of goes to the workers as written: not checked here, and the command says so', async () => {
  const r = await cli(['mosaic', 'start', '--sources', 'sources.yaml', ...area]);
  assert.equal(r.code, 2, r.err);
  assert.match(
    r.err,
    /--sources "sources\.yaml": no copy on this machine, so the request was not checked here; the workers read it from their first sources root/,
  );
  // Past the check: the command goes on to the server (and here finds none).
  assert.match(r.err, /127\.0\.0\.1:1/, r.err);
});

test('a relative --sources this machine has a copy of is planned here from the working directory', async () => {
  writeFileSync(
    path.join(dir, 'local.yaml'),
    'sources:\n  osm:\n    type: xyz\n    url: https://tiles.example.com/{z}/{x}/{y}.png\n    maxZoom: 5\n',
  );
  const r = await cli(['mosaic', 'start', '--sources', 'local.yaml', ...area]);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /zoom: must be within the source's range 0\.\.5 \(got 7\)/);
  rmSync(path.join(dir, 'local.yaml'));
});

test("schedule create names the request file's sourcesFile", async () => {
  const request = path.join(dir, 'nightly.yaml');
  writeFileSync(
    request,
    'sourcesFile: /config/absent.yaml\nsourceName: osm\nbbox: [5.7, 44, 19.5, 49.9]\nzoom: 7\noutput: s3://tilebreaker/nightly/alps.tif\n',
  );
  const r = await cli(['schedule', 'create', 'nightly-alps', '--cron', '0 2 * * *', '--request', request]);
  assert.equal(r.code, 2, r.err);
  assert.ok(
    r.err.includes(`sourcesFile in --request ${request} "/config/absent.yaml": no such file on this machine`),
    r.err,
  );
  // The same through mosaic start --request.
  const s = await cli(['mosaic', 'start', '--request', request]);
  assert.equal(s.code, 2, s.err);
  assert.ok(s.err.includes(`sourcesFile in --request ${request} "/config/absent.yaml"`), s.err);
});

test('--sources-on-worker: an absolute or a relative path goes to the workers unread', async () => {
  const rel = await cli(['mosaic', 'start', '--sources', 'sources.yaml', '--sources-on-worker', ...area]);
  assert.equal(rel.code, 2, rel.err);
  assert.doesNotMatch(rel.err, /no such file|no copy/);
  assert.match(rel.err, /127\.0\.0\.1:1/, rel.err);
  // Past the check: the command goes on to the server (and here finds none).
  const abs = await cli([
    'mosaic',
    'start',
    '--sources',
    '/config/only-on-workers.yaml',
    '--sources-on-worker',
    ...area,
  ]);
  assert.equal(abs.code, 2, abs.err);
  assert.doesNotMatch(abs.err, /no such file/);
  assert.match(abs.err, /127\.0\.0\.1:1/, abs.err);
  const request: MosaicRequest = {
    sourcesFile: '/config/only-on-workers.yaml',
    sourceName: 'osm',
    bbox: [5.7, 44, 19.5, 49.9],
    zoom: 7,
    output: 's3://tilebreaker/nightly/alps.tif',
  };
  assert.equal(await preflight(request, { sourcesOnWorker: true }), 'unchecked');
  await assert.rejects(preflight(request), /--sources "\/config\/only-on-workers\.yaml": no such file on this machine/);
  await assert.rejects(
    preflight({ ...request, sourcesFile: undefined } as unknown as MosaicRequest, { sourcesOnWorker: true }),
    /--sources-on-worker: the request names no sources file/,
  );
});

test('a sources file this machine has is still planned here: a bad zoom exits 2 before any connection', async () => {
  const sources = path.join(dir, 'sources.yaml');
  writeFileSync(
    sources,
    'sources:\n  osm:\n    type: xyz\n    url: https://tiles.example.com/{z}/{x}/{y}.png\n    maxZoom: 5\n',
  );
  const r = await cli(['mosaic', 'start', '--sources', sources, ...area]);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /zoom: must be within the source's range 0\.\.5 \(got 7\)/);
  rmSync(sources);
});
