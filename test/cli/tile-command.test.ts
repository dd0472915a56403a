import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { packageRoot } from '../../src/client/local-server';
import { startFaultServer, type FaultServer } from '../helpers/fault-server';

const run = promisify(execFile);
const cli = path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js');
let server: FaultServer;
let dir: string;
let sources: string;

before(async () => {
  server = await startFaultServer();
  dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-cli-'));
  sources = path.join(dir, 'sources.yaml');
  writeFileSync(
    sources,
    [
      'sources:',
      '  good:',
      '    type: xyz',
      `    url: ${server.url}/ok/{z}/{x}/{y}.png`,
      '  down:',
      '    type: xyz',
      `    url: ${server.url}/status/503/{z}/{x}/{y}.png`,
      '  wms-broken:',
      '    type: wms',
      `    url: ${server.url}/se-130-layer`,
      '    layers: [roads]',
    ].join('\n'),
  );
});
after(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The fields of `tilebreaker tile`'s JSON these tests read. */
interface TileJson {
  url: string;
  outcome: string | null;
  httpStatus: number | null;
  latencyMs: number | null;
  bytes: number;
  reason: string;
  retryAfterMs: number | null;
}

async function tile(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, 'tile', ...args]);
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

test('a good tile prints its outcome as JSON and exits 0', async () => {
  const r = await tile('5/1/2', '--source', sources, '--name', 'good');
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out) as TileJson;
  assert.equal(j.outcome, 'success');
  assert.equal(j.httpStatus, 200);
  assert.ok(j.bytes > 0);
  assert.equal(typeof j.latencyMs, 'number');
  assert.match(j.reason, /png 256x256/);
  assert.equal(j.url, `${server.url}/ok/5/1/2.png`);
});

test('a failing layer exits 1 with the classified reason', async () => {
  const down = await tile('5/1/2', '--source', sources, '--name', 'down');
  assert.equal(down.code, 1);
  assert.equal((JSON.parse(down.out) as TileJson).outcome, 'transient');
  // The Retry-After a 503 carried is in the JSON (null where there was none).
  assert.equal((JSON.parse(down.out) as TileJson).retryAfterMs, null);
  const busyFile = path.join(dir, 'busy.yaml');
  writeFileSync(
    busyFile,
    `sources:\n  busy:\n    type: xyz\n    url: "${server.url}/status/503/{z}/{x}/{y}.png?retryAfter=7"\n`,
  );
  const busy = JSON.parse((await tile('5/1/2', '--source', busyFile)).out) as TileJson;
  assert.deepEqual([busy.httpStatus, busy.retryAfterMs], [503, 7_000]);
  const wms = await tile('5/1/2', '--source', sources, '--name', 'wms-broken');
  assert.equal(wms.code, 1);
  const broken = JSON.parse(wms.out) as TileJson;
  assert.equal(broken.outcome, 'permanent');
  assert.match(broken.reason, /LayerNotDefined/);
});

test('bad input exits 2 and names what was wrong', async () => {
  const bad = await tile('5/99/2', '--source', sources, '--name', 'good');
  assert.equal(bad.code, 2);
  assert.match(bad.err, /x must be an integer 0\.\.31 at zoom 5 \(got 99\)/);
  const which = await tile('5/1/2', '--source', sources);
  assert.equal(which.code, 2);
  assert.match(which.err, /it has 3 sources .*name one with --name/);
  const missing = await tile('5/1/2', '--source', path.join(dir, 'nope.yaml'));
  assert.match(missing.err, /sources file .*nope\.yaml: ENOENT/);
  const none = await tile('5/1/2', '--name', 'good');
  assert.equal(none.code, 2);
  assert.match(none.err, /tile: give the sources file with --sources FILE/);
  const named = await tile('5/1/2', '--source', 'good');
  assert.equal(named.code, 2);
  assert.match(
    named.err,
    /tile: give the sources file with --sources FILE \(and the source in it with --source NAME\)/,
  );
});

test('--sources FILE, as mosaic start and redrive spell it, works for tile too (--source kept as the older spelling)', async () => {
  const r = await tile('5/1/2', '--sources', sources, '--name', 'good');
  assert.equal(r.code, 0, r.err);
  assert.equal((JSON.parse(r.out) as TileJson).outcome, 'success');
});

test('tile takes --sources FILE --source NAME as mosaic start and seed do, on a file of several sources; the older --source FILE still works, with a note', async () => {
  const r = await tile('5/1/2', '--sources', sources, '--source', 'down');
  assert.equal(r.code, 1, r.err);
  assert.equal((JSON.parse(r.out) as TileJson).url, `${server.url}/status/503/5/1/2.png`);
  assert.doesNotMatch(r.err, /older spelling/);
  const old = await tile('5/1/2', '--source', sources, '--name', 'good');
  assert.equal(old.code, 0, old.err);
  assert.match(old.err, /tile --source FILE is the older spelling; give --sources FILE --source NAME/);
  const both = await tile('5/1/2', '--sources', sources, '--source', 'good', '--name', 'down');
  assert.equal(both.code, 2);
  assert.match(both.err, /--source "good" and --name "down" name different sources/);
});
