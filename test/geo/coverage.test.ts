import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  clipRing,
  COVERED_SHARE,
  prepareCoverage,
  ringArea,
  rowAreas,
  type Coverage,
  type Ring,
} from '../../src/geo/coverage';
import { prng } from '../helpers/prng';
import { parseMosaicRequest } from '../../src/messages/mosaic-request';

const box = (minX: number, minY: number, maxX: number, maxY: number) => ({ minX, minY, maxX, maxY });
const square = (x0: number, y0: number, x1: number, y1: number): Ring => [
  [x0, y0],
  [x1, y0],
  [x1, y1],
  [x0, y1],
  [x0, y0],
];

test('a ring clipped to a box keeps the area inside it, whichever way the ring turns', () => {
  assert.equal(ringArea(clipRing(square(0, 0, 10, 10), box(2, 3, 5, 7))), 12);
  assert.equal(ringArea(clipRing(square(0, 0, 10, 10).reverse(), box(8, 8, 20, 20))), 4);
  assert.equal(clipRing(square(0, 0, 1, 1), box(5, 5, 6, 6)).length, 0);
  // A triangle over the box's corner: half of the box.
  assert.equal(
    ringArea(
      clipRing(
        [
          [0, 0],
          [4, 0],
          [0, 4],
          [0, 0],
        ],
        box(0, 0, 4, 4),
      ),
    ),
    8,
  );
});

/** The reference: each tile clipped on its own (Sutherland-Hodgman on four sides), holes taken away. */
const areaByClipping = (c: Coverage, b: ReturnType<typeof box>) =>
  c.reduce(
    (sum, [outer, ...holes]) =>
      sum + ringArea(clipRing(outer!, b)) - holes.reduce((h, r) => h + ringArea(clipRing(r, b)), 0),
    0,
  );
const covers = (c: Coverage, b: ReturnType<typeof box>) =>
  rowAreas(prepareCoverage(c), b.minX, b.maxX - b.minX, 1, b.minY, b.maxY)[0]! >
  (b.maxX - b.minX) * (b.maxY - b.minY) * COVERED_SHARE;

test('which boxes a coverage covers: area inside counts, a touch, a wrap-around or a hole does not', () => {
  // A U open to the north around the box (1..2, 1..2): it wraps three sides and covers none of it.
  const u: Coverage = [
    [
      [
        [0, 0],
        [3, 0],
        [3, 3],
        [2.5, 3],
        [2.5, 0.5],
        [0.5, 0.5],
        [0.5, 3],
        [0, 3],
        [0, 0],
      ],
    ],
  ];
  assert.equal(covers(u, box(1, 1, 2, 2)), false, 'inside the U: not covered');
  assert.equal(covers(u, box(0, 0, 1, 1)), true, "the U's corner");
  // Touching along an edge, or at a corner only: not covered.
  const sq: Coverage = [[square(0, 0, 1, 1)]];
  assert.equal(covers(sq, box(1, 0, 2, 1)), false);
  assert.equal(covers(sq, box(1, 1, 2, 2)), false);
  // A box in a hole is not covered; an island in the hole is.
  const holed: Coverage = [[square(0, 0, 10, 10), square(2, 2, 8, 8)], [square(4, 4, 6, 6)]];
  assert.equal(covers(holed, box(2.5, 2.5, 3.5, 3.5)), false, 'in the hole');
  assert.equal(covers(holed, box(4.5, 4.5, 5.5, 5.5)), true, 'on the island');
  assert.equal(covers(holed, box(7.5, 7.5, 8.5, 8.5)), true, "across the hole's edge");
});

test("a row's areas agree with clipping each tile on its own, on random polygons with holes, either way round", () => {
  const rnd = prng(20261204);
  for (let round = 0; round < 40; round++) {
    // A star-shaped ring round (50, 50), so it never crosses itself, and a smaller one inside it as a hole.
    const star = (r0: number, r1: number, n: number): Ring => {
      const ring = Array.from({ length: n }, (_, k): [number, number] => {
        const a = (2 * Math.PI * k) / n;
        const r = r0 + rnd() * (r1 - r0);
        return [50 + r * Math.cos(a), 50 + r * Math.sin(a)];
      });
      return rnd() < 0.5 ? [...ring, ring[0]!] : [...ring.reverse(), ring[0]!];
    };
    const c: Coverage = [[star(25, 45, 5 + Math.floor(rnd() * 60)), star(4, 10, 3 + Math.floor(rnd() * 10))]];
    const w = 3 + rnd() * 10;
    const cols = Math.ceil(100 / w);
    for (let y = 0; y < 100; y += w) {
      const areas = rowAreas(prepareCoverage(c), 0, w, cols, y, y + w);
      for (let k = 0; k < cols; k++) {
        const want = areaByClipping(c, box(k * w, y, (k + 1) * w, y + w));
        assert.ok(
          Math.abs(areas[k]! - want) <= 1e-9 * w * w + 1e-9,
          `round ${round}, row ${y}, column ${k}: ${areas[k]} vs ${want}`,
        );
      }
    }
  }
});

test('an edge narrower than float steps on a column boundary adds nothing to its neighbours; many rings cost one pass per row', () => {
  // Two squares meeting a float step or two east of column 1024's west edge, one of them with a slanted side that narrow.
  const edge = 1024 + 2 ** -42;
  const a: Ring = [
    [1000, 0],
    [edge, 0],
    [edge + 2 ** -42, 1],
    [1000, 1],
    [1000, 0],
  ];
  const b: Ring = [
    [edge + 2 ** -42, 0],
    [1100, 0],
    [1100, 1],
    [edge + 2 ** -42, 1],
    [edge + 2 ** -42, 0],
  ];
  const areas = rowAreas(prepareCoverage([[a], [b]]), 1020, 1, 10, 0, 1);
  assert.ok(
    areas.every((x) => x > 0.999 && x < 1.001),
    Array.from(areas).join(', '),
  );
  // 500 map sheets in one row of 2,048 columns: each sheet covers its own column.
  const sheets: Coverage = Array.from({ length: 500 }, (_, k) => [square(2 * k + 0.25, 0.25, 2 * k + 0.75, 0.75)]);
  const row = rowAreas(prepareCoverage(sheets), 0, 1, 2_048, 0, 1);
  for (let k = 0; k < 2_048; k++)
    assert.ok(Math.abs(row[k]! - (k % 2 === 0 && k < 1_000 ? 0.25 : 0)) < 1e-9, `column ${k}: ${row[k]}`);
});

test('a comb of 20,000 positions over 1,000 columns: a row costs its vertices plus its columns, not their product', () => {
  // Teeth crossing the whole row, as a forged coverage might: per-tile clipping would take vertices x columns.
  const teeth = 5_000;
  const ring: Ring = [[0, 0]];
  for (let t = 0; t < teeth; t++)
    ring.push([1_000, t * 2 + 0.5], [1_000, t * 2 + 1.5], [0.5, t * 2 + 1.5], [0.5, t * 2 + 2.5]);
  ring.push([0, 10_001], [0, 0]);
  const areas = rowAreas(prepareCoverage([[ring]]), 0, 1, 1_000, 100, 110);
  // Every column from 1 on is half covered (the teeth), column 0 a little more (the comb's spine).
  assert.ok(
    areas.slice(1).every((a) => Math.abs(a - 5) < 1e-6),
    `${areas[1]}, ${areas[999]}`,
  );
  assert.ok(Math.abs(areas[0]! - 7.5) < 1e-6, String(areas[0]));
});

test('a coverage in a request: GeoJSON shapes read, bad ones named by field, the bbox taken from its bounds', () => {
  const base = { sourcesFile: 's.yaml', sourceName: 'a', zoom: 5, output: 'a.tif' };
  const poly = { type: 'Polygon', coordinates: [square(6, 45, 8, 47)] };
  const r = parseMosaicRequest({ ...base, coverage: { type: 'Feature', properties: null, geometry: poly } });
  assert.deepEqual(r.bbox, [6, 45, 8, 47]);
  assert.deepEqual(r.coverage, [[square(6, 45, 8, 47)]]);
  // Given both, the bbox stays as given.
  assert.deepEqual(parseMosaicRequest({ ...base, bbox: [6.5, 45, 7, 46], coverage: poly }).bbox, [6.5, 45, 7, 46]);
  const multi = parseMosaicRequest({
    ...base,
    coverage: { type: 'MultiPolygon', coordinates: [[square(6, 45, 7, 46)], [square(9, 45, 10, 46)]] },
  });
  assert.equal(multi.coverage?.length, 2);
  assert.throws(() => parseMosaicRequest(base), /bbox: give a bbox, a coverage, or both/);
  assert.throws(
    () =>
      parseMosaicRequest({
        ...base,
        coverage: {
          type: 'LineString',
          coordinates: [
            [0, 0],
            [1, 1],
          ],
        },
      }),
    /coverage\.type: must be a GeoJSON Polygon or MultiPolygon, or a Feature or FeatureCollection of them/,
  );
  assert.throws(
    () =>
      parseMosaicRequest({
        ...base,
        coverage: {
          type: 'Polygon',
          coordinates: [
            [
              [6, 45],
              [8, 45],
              [8, 47],
              [6, 47],
            ],
          ],
        },
      }),
    /coverage\.coordinates\.0: a ring must end where it starts/,
  );
  assert.throws(
    () => parseMosaicRequest({ ...base, coverage: { type: 'Polygon', coordinates: [square(190, 45, 200, 47)] } }),
    /coverage: must lie within longitude -180\.\.180/,
  );
  const huge = {
    type: 'Polygon',
    coordinates: [[...Array.from({ length: 2_001 }, (_, k) => [6 + k / 1e5, 45 + (k % 2) / 10]), [6, 45]]],
  };
  assert.throws(
    () => parseMosaicRequest({ ...base, coverage: huge }),
    /coverage: has 2002 positions, more than 2000; simplify it \(ogr2ogr -simplify, mapshaper\)/,
  );
  // Even one made only of bad positions: one short error, not one per position.
  const bad = { type: 'Polygon', coordinates: [Array.from({ length: 50_000 }, () => ['x', 'y'])] };
  assert.throws(
    () => parseMosaicRequest({ ...base, coverage: bad }),
    (err: Error) => err.message.length < 500 && /coverage: has more than 2000 positions/.test(err.message),
  );
  // Nor does one whose positions hide inside a position.
  const hidden = { type: 'Polygon', coordinates: [[0, ...Array.from({ length: 70_000 }, () => ['a', 'b'])]] };
  assert.throws(
    () => parseMosaicRequest({ ...base, coverage: hidden }),
    (err: Error) => err.name === 'ConfigError' && /coverage: has more than 2000 positions/.test(err.message),
  );
  assert.throws(
    () => parseMosaicRequest({ ...base, coverage: { type: 'Polygon', coordinates: [[]] } }),
    /coverage\.coordinates\.0: a ring needs at least 4 positions/,
  );
});
