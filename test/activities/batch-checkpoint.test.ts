import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import type { TileResult } from '../../src/activities/fetch/fetch-batch';
import { BatchCheckpoint, removeCheckpoints } from '../../src/activities/mosaic/batch-checkpoint';
import { readJournals, writeJournal } from '../../src/activities/mosaic/journal';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-checkpoint-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const tiles = [0, 1, 2, 3].map((x) => ({ z: 5, x, y: 0 }));
const ok = (x: number): TileResult => ({
  z: 5,
  x,
  y: 0,
  status: 'ok',
  kind: 'success',
  reason: 'ok',
  attempts: 1,
  httpStatus: 200,
  path: `/store/5/${x}/0.png`,
});
const warnings: string[] = [];
const warn = (w: string) => warnings.push(w);

describe('a batch checkpoint', () => {
  test("appends each finished request; a retry reads back only its own run's records of the tiles at their positions", async () => {
    const c = await BatchCheckpoint.open(dir, 'p0-b0-0', 'wf/run-1', warn);
    const results: (TileResult | null)[] = [ok(0), ok(1), null, null];
    c.append([0], results);
    c.append([1], results);
    await c.close();
    const file = path.join(dir, 'p0-b0-0.checkpoint');
    // Another run's line, a line torn by a crash, a record of another tile at position 2, a forged status.
    appendFileSync(file, `${JSON.stringify({ owner: 'wf/run-0', at: [[3, ok(3)]] })}\n`);
    appendFileSync(file, `${JSON.stringify({ owner: 'wf/run-1', at: [[2, ok(7)]] })}\n`);
    appendFileSync(file, `${JSON.stringify({ owner: 'wf/run-1', at: [[3, { ...ok(3), status: 'done' }]] })}\n`);
    appendFileSync(file, '{"owner":"wf/run-1","at":[[3,');
    const again = await BatchCheckpoint.open(dir, 'p0-b0-0', 'wf/run-1', warn);
    assert.deepEqual(await again.load(tiles), [ok(0), ok(1), null, null]);
    await again.close();
    assert.deepEqual(warnings, []);
  });

  test('a line that marks a tile ok or stale without its stored path is refused: the tile is fetched again', async () => {
    const c = await BatchCheckpoint.open(dir, 'p0-b0-3', 'wf/run-1', warn);
    await c.close();
    const { path: _ok, ...okNoPath } = ok(0);
    const { path: _stale, ...staleNoPath } = { ...ok(1), status: 'stale' as const };
    const hole: TileResult = { z: 5, x: 2, y: 0, status: 'hole', reason: 'breaker open: hole', attempts: 0 };
    appendFileSync(
      path.join(dir, 'p0-b0-3.checkpoint'),
      `${JSON.stringify({
        owner: 'wf/run-1',
        at: [
          [0, okNoPath],
          [1, staleNoPath],
          [2, hole],
          [3, ok(3)],
        ],
      })}\n`,
    );
    const again = await BatchCheckpoint.open(dir, 'p0-b0-3', 'wf/run-1', warn);
    assert.deepEqual(await again.load(tiles), [null, null, hole, ok(3)]);
    await again.close();
  });

  test('is never read as a journal, and the assembly removes it', async () => {
    const c = await BatchCheckpoint.open(dir, 'p0-b0-1', 'wf/run-1', warn);
    c.append([0], [ok(0)]);
    await c.close();
    await writeJournal(dir, {
      batchId: 'p0-b0-1',
      pass: 0,
      writtenAt: 1,
      tiles: [{ i: 0, z: 5, x: 0, y: 0, status: 'ok', reason: 'ok', attempts: 1, pass: 0 }],
    });
    assert.deepEqual(
      (await readJournals(dir)).map((j) => j.batchId),
      ['p0-b0-1'],
    );
    await removeCheckpoints(dir);
    assert.throws(() => readFileSync(path.join(dir, 'p0-b0-1.checkpoint')), /ENOENT/);
  });

  test('a symlink in its place is neither written through nor read: the batch runs on heartbeats alone', async () => {
    const target = path.join(dir, 'target.txt');
    writeFileSync(target, 'untouched');
    symlinkSync(target, path.join(dir, 'p0-b0-2.checkpoint'));
    const c = await BatchCheckpoint.open(dir, 'p0-b0-2', 'wf/run-1', warn);
    c.append([0], [ok(0)]);
    await c.close();
    assert.equal(readFileSync(target, 'utf8'), 'untouched');
    assert.deepEqual(await c.load(tiles), [null, null, null, null]);
    assert.deepEqual(warnings, [
      'checkpoint p0-b0-2.checkpoint cannot be written (ELOOP): a retry resumes from heartbeats only',
    ]);
  });
});
