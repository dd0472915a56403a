import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TileResult } from '../../src/activities/fetch/fetch-batch';
import { LOAD_BEAT_MS, LOAD_READS, ObjectCheckpoint } from '../../src/activities/mosaic/batch-checkpoint';
import { objectStorage, type Storage } from '../../src/activities/storage/storage';
import { packageRoot } from '../../src/client/local-server';
import { startLocalS3, type LocalS3 } from '../../src/demo/s3-server';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-checkpoint-load-'));
let s3: LocalS3;

before(async () => {
  s3 = await startLocalS3({ root: packageRoot(__dirname), dir: path.join(dir, 's3'), bucket: 'mosaics' });
});

after(async () => {
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const ok = (x: number): TileResult => ({
  z: 9,
  x,
  y: 1,
  status: 'ok',
  reason: 'fetched',
  attempts: 1,
  path: `s3://mosaics/nightly/big.tiles/demo/9/${x}/1.png`,
});

test('a checkpoint resume within the heartbeat: a bucket checkpoint of many objects heartbeats every second of loading and reads them a few at a time', async () => {
  const journal = 's3://mosaics/nightly/big.work/journal-run';
  const real = objectStorage(s3.client);
  // A long attempt's objects: one a second, each with the tile that finished in it.
  const parts = 120;
  const tiles = Array.from({ length: parts }, (_, x) => ({ z: 9, x, y: 1 }));
  for (let from = 0; from < parts; from += 20) {
    await Promise.all(
      tiles
        .slice(from, from + 20)
        .map((t) =>
          real.write(
            `${journal}/p0-b0-0.checkpoint/1000-aaaaaaaa-${String(t.x).padStart(6, '0')}.jsonl`,
            Buffer.from(`${JSON.stringify({ owner: 'wf/run-1', at: [[t.x, ok(t.x)]] })}\n`),
          ),
        ),
    );
  }
  // Each read costs READ_MS on the test's clock, whatever the machine takes: 120 of them, 6 s of loading.
  const READ_MS = 50;
  let clock = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const slow: Storage = {
    ...real,
    async read(loc) {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        return await real.read(loc);
      } finally {
        inFlight--;
        clock += READ_MS;
      }
    },
  };
  const beats: number[] = [];
  const checkpoint = ObjectCheckpoint.open(
    journal,
    'p0-b0-0',
    'wf/run-1',
    () => assert.fail('no warning expected'),
    slow,
  );
  const loaded = await checkpoint.load(tiles, { heartbeat: () => beats.push(clock), now: () => clock });
  assert.deepEqual(
    loaded,
    tiles.map((t) => ok(t.x)),
  );
  assert.equal(clock, parts * READ_MS);
  // From the start of the load to its end, no stretch longer than a beat's interval and one read.
  const marks = [0, ...beats, clock];
  const gaps = marks.slice(1).map((m, k) => m - marks[k]!);
  assert.ok(Math.max(...gaps) <= LOAD_BEAT_MS + READ_MS, `heartbeats at ${beats.join(', ')} of ${clock} ms`);
  assert.equal(maxInFlight, LOAD_READS);
});

const line = (owner: string, at: [number, TileResult][]) => `${JSON.stringify({ owner, at })}\n`;
const hole = (x: number): TileResult => ({ z: 9, x, y: 1, status: 'hole', reason: 'breaker open: hole', attempts: 0 });

test("a loaded bucket checkpoint is compacted into one object where its last one sorted: a later object of a lingering attempt stays and still wins, and another run's lines are kept", async () => {
  const journal = 's3://mosaics/nightly/compact.work/journal-run';
  const prefix = `${journal}/p0-b0-0.checkpoint`;
  const real = objectStorage(s3.client);
  const tiles = [0, 1, 2].map((x) => ({ z: 9, x, y: 1 }));
  await real.write(
    `${prefix}/1000-aaaaaaaa-000000.jsonl`,
    Buffer.from(line('wf/run-1', [[0, hole(0)]]) + line('wf/run-0', [[2, ok(2)]])),
  );
  await real.write(`${prefix}/1000-aaaaaaaa-000001.jsonl`, Buffer.from(line('wf/run-1', [[0, ok(0)]])));
  await real.write(`${prefix}/2000-bbbbbbbb-000000.jsonl`, Buffer.from(line('wf/run-1', [[1, hole(1)]])));
  const warnings: string[] = [];
  const first = await ObjectCheckpoint.open(journal, 'p0-b0-0', 'wf/run-1', (w) => warnings.push(w), real).load(tiles);
  assert.deepEqual(first, [ok(0), hole(1), null]);
  assert.deepEqual(await real.listFiles(prefix), ['2000-bbbbbbbb-000000-merged.jsonl']);
  // The attempt that wrote 2000-bbbbbbbb, still running, writes its next object after that load.
  await real.write(`${prefix}/2000-bbbbbbbb-000001.jsonl`, Buffer.from(line('wf/run-1', [[1, ok(1)]])));
  const second = await ObjectCheckpoint.open(journal, 'p0-b0-0', 'wf/run-1', (w) => warnings.push(w), real).load(tiles);
  assert.deepEqual(second, [ok(0), ok(1), null]);
  assert.deepEqual(await real.listFiles(prefix), ['2000-bbbbbbbb-000001-merged.jsonl']);
  // The other run's line went along: its own load still finds it.
  assert.deepEqual(
    await ObjectCheckpoint.open(journal, 'p0-b0-0', 'wf/run-0', (w) => warnings.push(w), real).load(tiles),
    [null, null, ok(2)],
  );
  assert.deepEqual(warnings, []);
});

test('a load that finds one of the listed objects gone (another attempt compacting them) does not compact', async () => {
  const journal = 's3://mosaics/nightly/gone.work/journal-run';
  const prefix = `${journal}/p0-b0-0.checkpoint`;
  const real = objectStorage(s3.client);
  const tiles = [0, 1].map((x) => ({ z: 9, x, y: 1 }));
  await real.write(`${prefix}/1000-aaaaaaaa-000000.jsonl`, Buffer.from(line('wf/run-1', [[0, ok(0)]])));
  await real.write(`${prefix}/1000-aaaaaaaa-000001.jsonl`, Buffer.from(line('wf/run-1', [[1, ok(1)]])));
  const vanishing: Storage = { ...real, read: async (loc) => (loc.endsWith('-000000.jsonl') ? null : real.read(loc)) };
  const loaded = await ObjectCheckpoint.open(
    journal,
    'p0-b0-0',
    'wf/run-1',
    () => assert.fail('no warning expected'),
    vanishing,
  ).load(tiles);
  assert.deepEqual(loaded, [null, ok(1)]);
  assert.deepEqual((await real.listFiles(prefix)).sort(), ['1000-aaaaaaaa-000000.jsonl', '1000-aaaaaaaa-000001.jsonl']);
});

test('a checkpoint object the bucket refused goes again, first, with the next: every record of the attempt is read back, in order', async () => {
  const journal = 's3://mosaics/nightly/refused.work/journal-run';
  const real = objectStorage(s3.client);
  let refuse = 1;
  const flaky: Storage = {
    ...real,
    async write(loc, body, opts) {
      if (refuse-- > 0) throw new Error(`storage: cannot write ${loc} (ECONNREFUSED)`);
      return real.write(loc, body, opts);
    },
  };
  const warnings: string[] = [];
  const tiles = [0, 1].map((x) => ({ z: 9, x, y: 1 }));
  const checkpoint = ObjectCheckpoint.open(journal, 'p0-b0-0', 'wf/run-1', (w) => warnings.push(w), flaky);
  checkpoint.append([0, 1], [hole(0), hole(1)]);
  await new Promise((r) => setTimeout(r, 1_500));
  // The first object was refused; the tile's later record must still win over the one that goes with it.
  checkpoint.append([0], [ok(0), null]);
  await checkpoint.close();
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /not written yet \(storage: cannot write .*\(ECONNREFUSED\)\): tried again with the next/);
  const loaded = await ObjectCheckpoint.open(
    journal,
    'p0-b0-0',
    'wf/run-1',
    () => assert.fail('no warning expected'),
    real,
  ).load(tiles);
  assert.deepEqual(loaded, [ok(0), hole(1)]);
});
