import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  gridBounds,
  gridFor,
  parseMosaicRequest,
  planMosaic,
  planMosaicRun,
  tileOf,
} from '../../src/activities/mosaic/plan';
import { manifestStatus } from '../../src/activities/mosaic/batch';
import { latestRecords, type Journal } from '../../src/activities/mosaic/journal';
import { ORIGIN_SHIFT_M, tileBounds } from '../../src/geo/mercator';
import type { MosaicRequest } from '../../src/messages/mosaic-types';
import { checkPlan } from '../../src/messages/plan-check';

const source = { type: 'xyz', url: 'http://127.0.0.1:9/{z}/{x}/{y}.png', maxZoom: 18 } as const;
const req = (extra: Partial<MosaicRequest> = {}): MosaicRequest => ({
  source,
  bbox: [5.7, 44.0, 19.5, 49.9],
  zoom: 7,
  output: '/tmp/x.tif',
  ...extra,
});

test('the grid covers the bbox and no more: an edge on a tile boundary adds no column or row', () => {
  const t = tileBounds(5, 10, 12);
  const g = gridFor({ minX: t.minX, minY: t.minY, maxX: t.maxX, maxY: t.maxY }, 5, 256);
  assert.deepEqual([g.xMin, g.xMax, g.yMin, g.yMax], [10, 10, 12, 12]);
  const world = gridFor(
    { minX: -ORIGIN_SHIFT_M, minY: -ORIGIN_SHIFT_M, maxX: ORIGIN_SHIFT_M, maxY: ORIGIN_SHIFT_M },
    2,
    256,
  );
  assert.deepEqual([world.xMin, world.xMax, world.yMin, world.yMax], [0, 3, 0, 3]);
  assert.deepEqual(gridBounds(g), t);
});

test('plan: 5 x 4 tiles at zoom 7 over the Alps, row-major from the top-left, defaults applied', async () => {
  const plan = await planMosaic(req());
  assert.deepEqual([plan.grid.xMin, plan.grid.xMax, plan.grid.yMin, plan.grid.yMax], [66, 70, 43, 46]);
  assert.equal(plan.total, 20);
  assert.deepEqual(tileOf(plan.grid, 0), { z: 7, x: 66, y: 43 });
  assert.deepEqual(tileOf(plan.grid, 13), { z: 7, x: 69, y: 45 });
  assert.equal(plan.fallback, 'fail-fast');
  assert.equal(plan.workDir, '/tmp/x.work');
  assert.equal(plan.storeRoot, '/tmp/x.tiles');
  assert.equal(plan.deadlineAt, null);
  // Sidecars by default, as every plan before the choice: the field appears only when turned off.
  assert.equal('sidecars' in plan, false);
  assert.equal((await planMosaic(req({ sidecars: false }))).sidecars, false);
  assert.doesNotThrow(() => checkPlan({ ...plan, sidecars: false }, 'plan'));
  await assert.rejects(
    planMosaic(req({ sidecars: 'no' as unknown as boolean })),
    /sidecars: Invalid input: expected boolean, received string \(got "no"\)/,
  );
});

test('plan: a deadline is a duration from now or an instant', async () => {
  assert.equal((await planMosaic(req({ deadline: '90m' }), { now: 1_000 })).deadlineAt, 1_000 + 90 * 60_000);
  // The same durations the CLI's --for and --wait-for take.
  assert.equal((await planMosaic(req({ deadline: '1h30m' }), { now: 1_000 })).deadlineAt, 1_000 + 90 * 60_000);
  // Instants are judged against the injected clock, never today's date.
  const now = Date.parse('2030-06-01T00:00:00Z');
  assert.equal(
    (await planMosaic(req({ deadline: '2030-06-01T02:00:00Z' }), { now })).deadlineAt,
    Date.parse('2030-06-01T02:00:00Z'),
  );
  await assert.rejects(
    planMosaic(req({ deadline: '2030-05-31T23:59:59Z' }), { now }),
    /deadline: 2030-05-31T23:59:59Z is already past \(now 2030-06-01T00:00:00.000Z\).*use a duration/,
  );
  await assert.rejects(planMosaic(req({ deadline: '30d' })), /deadline: at most 7 days ahead \(got "30d"\)/);
  assert.throws(
    () => parseMosaicRequest(req({ batchSize: 1 })),
    /blockTiles: makes 16384 batches of batchSize 1 per block, more than 2048/,
  );
  assert.throws(
    () => parseMosaicRequest(req({ deadline: 'tomorrow-ish' })),
    /deadline: must be an ISO-8601 instant or a duration .*got "tomorrow-ish"/,
  );
});

test('bad requests name the field and the value', async () => {
  assert.throws(() => parseMosaicRequest({ ...req(), zoom: 7.5 }), /zoom: .*got 7\.5/);
  assert.throws(
    () => parseMosaicRequest({ ...req(), output: '/tmp/x.png' }),
    /output: must be a path ending in \.tif .*got "\/tmp\/x\.png"/,
  );
  assert.throws(
    () => parseMosaicRequest({ ...req(), bbox: [-190, 0, 10, 10] }),
    /bbox: must lie within longitude -180\.\.180/,
  );
  assert.throws(() => parseMosaicRequest({ ...req(), fallback: 'retry' as never }), /fallback: .*got "retry"/);
  assert.throws(() => parseMosaicRequest({ ...req(), colour: 'red' }), /unknown field "colour"/);
  assert.throws(
    () => parseMosaicRequest({ bbox: [0, 0, 1, 1], zoom: 3, output: '/tmp/a.tif' }),
    /source: give exactly one of sourcesFile/,
  );
  await assert.rejects(
    planMosaic(req({ zoom: 12, extraFormats: ['webp'] })),
    /extraFormats: a 40448x25600 mosaic is too large for a WebP copy/,
  );
  await assert.rejects(
    planMosaic(req({ directChunks: true })),
    /directChunks: needs a WMS source \(got a xyz source\)/,
  );
  await assert.rejects(planMosaic(req({ zoom: 19 })), /zoom: must be within the source's range 0\.\.18 \(got 19\)/);
  const { source: _inline, ...noSource } = req();
  await assert.rejects(
    planMosaic({ ...noSource, sourcesFile: '/nonexistent/sources.yaml' }),
    /sources file \/nonexistent\/sources\.yaml/,
  );
  await assert.rejects(
    planMosaic(req({ source: { ...source, url: 'ftp://x/{z}' } as never })),
    /source.*url: must be an http or https URL/,
  );
});

test('manifest statuses: refusals and curable failures are dead letters; permanent and configuration failures are failed', () => {
  const t = { z: 1, x: 0, y: 0, reason: '', attempts: 1 };
  assert.equal(manifestStatus({ ...t, status: 'ok' }), 'ok');
  assert.equal(manifestStatus({ ...t, status: 'deferred', breakerState: 'open' }), 'dead-lettered');
  assert.equal(manifestStatus({ ...t, status: 'failed', kind: 'transient' }), 'dead-lettered');
  assert.equal(manifestStatus({ ...t, status: 'failed', kind: 'service-exception' }), 'dead-lettered');
  assert.equal(manifestStatus({ ...t, status: 'failed', kind: 'permanent' }), 'failed');
  assert.equal(manifestStatus({ ...t, status: 'failed', kind: 'neutral', configError: true }), 'failed');
  assert.equal(manifestStatus({ ...t, status: 'hole', kind: 'neutral' }), 'hole');
});

test("journals: a later pass's record of a tile replaces an earlier one; unrecorded tiles are null", () => {
  const rec = (i: number, status: 'ok' | 'dead-lettered', pass: number) => ({
    i,
    z: 1,
    x: i,
    y: 0,
    status,
    reason: '',
    attempts: 1,
    pass,
  });
  const journals: Journal[] = [
    { batchId: 'p0-a', pass: 0, writtenAt: 1, tiles: [rec(0, 'ok', 0), rec(1, 'dead-lettered', 0)] },
    { batchId: 'p1-a', pass: 1, writtenAt: 2, tiles: [rec(1, 'ok', 1)] },
  ];
  const latest = latestRecords(journals, 3);
  assert.equal(latest[1]!.status, 'ok');
  assert.equal(latest[1]!.pass, 1);
  assert.equal(latest[1]!.attempts, 2, 'attempts count every pass: the failed first one too');
  assert.equal(latest[0]!.attempts, 1);
  assert.equal(latest[2], null);
});

test("journals: a later pass the breaker refused (no request) keeps what the tile's last request got: kind, HTTP status, abandonment", () => {
  const base = { z: 1, y: 0, pass: 0 };
  const journals: Journal[] = [
    {
      batchId: 'p0-a',
      pass: 0,
      writtenAt: 1,
      tiles: [
        {
          ...base,
          i: 0,
          x: 0,
          status: 'dead-lettered',
          kind: 'transient',
          httpStatus: null,
          reason: 'attempt 1: no response: timeout',
          attempts: 1,
        },
        {
          ...base,
          i: 1,
          x: 1,
          status: 'dead-lettered',
          kind: 'transient',
          httpStatus: 503,
          reason: 'HTTP 503',
          attempts: 3,
        },
        {
          ...base,
          i: 2,
          x: 2,
          status: 'dead-lettered',
          kind: 'transient',
          httpStatus: null,
          abandonedAfterMs: 812,
          breakerState: 'open',
          reason: 'abandoned',
          attempts: 1,
        },
        { ...base, i: 3, x: 3, status: 'dead-lettered', breakerState: 'open', reason: 'breaker open', attempts: 0 },
      ],
    },
    {
      batchId: 'p1-a',
      pass: 1,
      writtenAt: 2,
      tiles: [0, 1, 2, 3].map((i) => ({
        ...base,
        i,
        x: i,
        pass: 1,
        status: 'dead-lettered' as const,
        breakerState: 'open' as const,
        reason: 'breaker open (failure-ratio)',
        attempts: 0,
      })),
    },
  ];
  const [timedOut, down, abandoned, never] = latestRecords(journals, 4);
  assert.deepEqual(
    [timedOut!.kind, timedOut!.httpStatus, timedOut!.attempts, timedOut!.breakerState, timedOut!.pass],
    ['transient', null, 1, 'open', 1],
  );
  assert.equal(timedOut!.reason, 'breaker open (failure-ratio)', "the deciding pass's reason");
  assert.deepEqual([down!.kind, down!.httpStatus, down!.attempts], ['transient', 503, 3]);
  assert.deepEqual([abandoned!.kind, abandoned!.abandonedAfterMs], ['transient', 812]);
  assert.deepEqual(
    [never!.kind, never!.httpStatus, never!.attempts, never!.breakerState],
    [undefined, undefined, 0, 'open'],
    'never requested: breaker open, as before',
  );
  // A later request replaces the earlier one's outcome.
  const redone = latestRecords(
    [
      journals[0]!,
      {
        batchId: 'p1-a',
        pass: 1,
        writtenAt: 2,
        tiles: [
          { ...base, i: 1, x: 1, pass: 1, status: 'ok', kind: 'success', httpStatus: 200, reason: 'ok', attempts: 1 },
        ],
      },
    ],
    4,
  );
  assert.deepEqual([redone[1]!.kind, redone[1]!.httpStatus, redone[1]!.attempts], ['success', 200, 4]);
});

test("each run journals in its own folder; planning a new run on the same output clears the earlier runs' journals", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-plan-'));
  try {
    const output = path.join(dir, 'm.tif');
    const old = await planMosaicRun(req({ output }), 'run-a');
    mkdirSync(old.journalDir, { recursive: true });
    writeFileSync(path.join(old.journalDir, 'p1-b0-0.json'), '{}');
    const fresh = await planMosaicRun(req({ output }), 'run-b');
    assert.notEqual(fresh.journalDir, old.journalDir);
    assert.deepEqual(readdirSync(fresh.workDir), ['plan.json']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('plan: over maxTiles, the advice fits where maxTiles is: raise it below its cap; at the cap (or past it) split the bbox', async () => {
  // 20 tiles over the Alps at zoom 7: raising maxTiles helps.
  await assert.rejects(
    planMosaic(req({ maxTiles: 3 })),
    /maxTiles: the plan has 20 tiles .* more than maxTiles 3; raise maxTiles to 20 or more \(at most 4194304\) or shrink the bbox/,
  );
  // The world at zoom 12: 4096 x 4096 tiles, four times the cap: at the cap, it cannot be raised further.
  const world = req({ bbox: [-180, -85, 180, 85], zoom: 12, maxTiles: 4_194_304 });
  await assert.rejects(planMosaic(world), (err: Error) => {
    assert.match(
      err.message,
      /maxTiles: the plan has 16\d{6} tiles \(4096 columns x 40\d\d rows at zoom 12\), more than maxTiles 4194304; maxTiles is at its cap, 4194304 tiles, and cannot be raised further: split the bbox into at least 4 parts, one mosaic each \(or, for a tile cache, one seed each\), or take a lower zoom/,
    );
    assert.doesNotMatch(err.message, /raise maxTiles/);
    return true;
  });
  // Below the cap, but the plan is past it: raising would not be enough either.
  await assert.rejects(
    planMosaic({ ...world, maxTiles: 100_000 }),
    /more than maxTiles 100000; maxTiles can be raised to 4194304 at most, fewer than the plan's tiles: split the bbox into at least 4 parts/,
  );
});
