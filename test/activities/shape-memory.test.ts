import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Verdict } from '../../src/activities/validate/classify';
import {
  judgeRequestFault,
  MARK_EVERY_MS,
  requestShape,
  SERVED_RECORD_WITHIN_MS,
  shapeKey,
  ShapeMemory,
  SYSTEMIC_WITHIN_MS,
  wantsRecord,
} from '../../src/activities/validate/shape-memory';
import { getMapUrl } from '../../src/sources/request-url';
import { parseSource, type SourceConfig } from '../../src/sources/schema';

const wms = (layers: string[]) =>
  parseSource({ type: 'wms', url: 'http://maps.example/cgi-bin/mapserv?map=a.map', layers }) as Extract<
    SourceConfig,
    { type: 'wms' }
  >;
const layerNotDefined: Verdict = {
  kind: 'permanent',
  reason: 'ServiceException: LayerNotDefined: msWMSLoadGetMapParams(): Invalid layer(s) given in the LAYERS parameter.',
  httpStatus: 200,
  bytes: 300,
  contentType: 'text/xml',
  latencyMs: 5,
  exceptionCode: 'LayerNotDefined',
  requestFault: true,
};
const T0 = 1_800_000_000_000;

describe('request shapes and the systemic / configuration judgement', () => {
  test('a WMS shape is the GetMap URL without the tile geometry: two tiles share it, another layer does not', () => {
    const s = wms(['quadrants']);
    const a = requestShape(s, getMapUrl(s, { minX: 0, minY: 0, maxX: 1000, maxY: 1000 }, 256, 256));
    const b = requestShape(s, getMapUrl(s, { minX: 1000, minY: 1000, maxX: 2000, maxY: 2000 }, 512, 512));
    assert.equal(a, b);
    assert.doesNotMatch(a, /bbox|width|height/i);
    assert.match(a, /LAYERS=quadrants/i);
    const other = wms(['roads']);
    assert.notEqual(requestShape(other, getMapUrl(other, { minX: 0, minY: 0, maxX: 1000, maxY: 1000 }, 256, 256)), a);
  });

  test('an XYZ shape is its template', () => {
    const s = parseSource({ type: 'xyz', url: 'http://tiles.example/{z}/{x}/{y}.png' });
    assert.equal(requestShape(s, 'http://tiles.example/1/0/0.png'), requestShape(s, 'http://tiles.example/9/3/4.png'));
  });

  test('a request-blaming fault for a shape never served is a configuration error naming the code and the source', () => {
    const j = judgeRequestFault(layerNotDefined, 'shape', new ShapeMemory(), T0, 'roads-wrong');
    assert.equal(j.configError, true);
    assert.equal(j.systemic, false);
    assert.equal(j.verdict.kind, 'permanent');
    assert.equal(j.verdict.configError, true);
    assert.match(j.verdict.reason, /^configuration error: LayerNotDefined for source "roads-wrong"/);
  });

  test('for a shape that succeeded within 10 min it is systemic: a service exception; after that, configuration again', () => {
    const m = new ShapeMemory();
    m.succeeded('shape', T0);
    const soon = judgeRequestFault(layerNotDefined, 'shape', m, T0 + 30_000, 'roads');
    assert.deepEqual(
      [soon.systemic, soon.configError, soon.verdict.kind, soon.verdict.configError],
      [true, false, 'service-exception', undefined],
    );
    assert.match(soon.verdict.reason, /^systemic: LayerNotDefined for a request that succeeded 30 s ago/);
    assert.equal(judgeRequestFault(layerNotDefined, 'shape', m, T0 + SYSTEMIC_WITHIN_MS, 'roads').systemic, true);
    const late = judgeRequestFault(layerNotDefined, 'shape', m, T0 + SYSTEMIC_WITHIN_MS + 1, 'roads');
    assert.deepEqual([late.systemic, late.configError], [false, true]);
    assert.match(late.verdict.reason, /last succeeded 10 min ago/);
    // Another shape's success says nothing about this one.
    assert.equal(judgeRequestFault(layerNotDefined, 'other', m, T0 + 1, 'roads').configError, true);
  });

  test('other verdicts pass unchanged; a per-tile code (TileOutOfRange) stays a per-tile permanent fault', () => {
    const { requestFault: _r, exceptionCode: _c, ...rest } = layerNotDefined;
    const transient: Verdict = { ...rest, kind: 'transient', reason: 'HTTP 503' };
    assert.equal(judgeRequestFault(transient, 'shape', new ShapeMemory(), T0, 's').verdict, transient);
    const outOfRange: Verdict = { ...layerNotDefined, exceptionCode: 'TileOutOfRange' };
    const j = judgeRequestFault(outOfRange, 'shape', new ShapeMemory(), T0, 's');
    assert.deepEqual([j.verdict.kind, j.configError, j.systemic], ['permanent', false, false]);
    // 401/403 are configuration errors already (classify).
    const auth: Verdict = { ...transient, kind: 'neutral', configError: true, reason: 'HTTP 401' };
    assert.equal(judgeRequestFault(auth, 'shape', new ShapeMemory(), T0, 's').configError, true);
  });

  test('the memory is bounded: the least recently successful shape goes first', () => {
    const m = new ShapeMemory();
    for (let i = 0; i <= 4_096; i++) m.succeeded(`s${i}`, T0 + i);
    assert.equal(m.served('s0'), false);
    assert.equal(m.served('s1'), true);
    assert.equal(m.served('s4096'), true);
  });

  test('a shape the tile store records served within 8 days is systemic too, the reason says so; past that, or with no record, configuration', () => {
    const fresh = new ShapeMemory();
    assert.equal(SERVED_RECORD_WITHIN_MS, 8 * 24 * 3_600_000);
    const night = judgeRequestFault(layerNotDefined, 'shape', fresh, T0, 'roads', {
      at: T0 - 9 * 3_600_000,
      where: 'the tile store',
    });
    assert.deepEqual([night.systemic, night.configError, night.verdict.kind], [true, false, 'service-exception']);
    assert.match(
      night.verdict.reason,
      /^systemic: LayerNotDefined for a request last served 9 h ago \(recorded in the tile store\)/,
    );
    assert.equal(
      judgeRequestFault(layerNotDefined, 'shape', fresh, T0, 'roads', {
        at: T0 - SERVED_RECORD_WITHIN_MS,
        where: 'the tile store',
      }).systemic,
      true,
    );
    const old = judgeRequestFault(layerNotDefined, 'shape', fresh, T0, 'roads', {
      at: T0 - SERVED_RECORD_WITHIN_MS - 1,
      where: 'the tile store',
    });
    assert.deepEqual([old.systemic, old.configError], [false, true]);
    assert.match(old.verdict.reason, /the tile store last recorded it served 8 d ago/);
    assert.match(
      judgeRequestFault(layerNotDefined, 'shape', fresh, T0, 'roads').verdict.reason,
      /has not succeeded in this worker; the tile store has no record of it served/,
    );
    // The store is wanted only for a request fault this process's memory cannot judge.
    assert.equal(wantsRecord(layerNotDefined, 'shape', fresh, T0), true);
    const m = new ShapeMemory();
    m.succeeded('shape', T0);
    assert.equal(wantsRecord(layerNotDefined, 'shape', m, T0 + 1_000), false);
    assert.equal(wantsRecord({ ...layerNotDefined, kind: 'transient' }, 'shape', fresh, T0), false);
  });

  test('a store record is marked on the first success, then at most every 10 min; a failed write is tried again; a found record is believed for a minute', () => {
    const m = new ShapeMemory();
    assert.equal(m.claimMark('w', T0), true);
    assert.equal(m.claimMark('w', T0 + 1_000), false);
    assert.equal(m.claimMark('w', T0 + MARK_EVERY_MS), true);
    m.releaseMark('w');
    assert.equal(m.claimMark('w', T0 + MARK_EVERY_MS + 1), true, 'released: due again');
    assert.equal(m.recorded('w', T0), null);
    m.noteRecord('w', T0 - 3_600_000, T0);
    assert.equal(m.recorded('w', T0 + 60_000), T0 - 3_600_000);
    assert.equal(m.recorded('w', T0 + 60_001), null, 'read again after a minute');
    m.noteRecord('old', T0 - SERVED_RECORD_WITHIN_MS - 1, T0);
    assert.equal(m.recorded('old', T0), null, 'a record too old to count is not remembered');
    assert.match(shapeKey('xyz https://t.example/{z}/{x}/{y}.png?key=K'), /^[0-9a-f]{64}$/);
  });
});
