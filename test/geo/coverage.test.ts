import assert from 'node:assert/strict';
import { test } from 'node:test';
import { areaWithin, clipRing, coverageWithin, ringArea, type Coverage, type Ring } from '../../src/geo/coverage';
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
  const covers = coverageWithin(u, box(0, 0, 3, 3));
  assert.equal(covers(box(1, 1, 2, 2)), false, 'inside the U: not covered');
  assert.equal(areaWithin(u, box(1, 1, 2, 2)), 0);
  assert.equal(covers(box(0, 0, 1, 1)), true, 'the U’s corner');
  // Touching along an edge, or at a corner only: not covered.
  const sq: Coverage = [[square(0, 0, 1, 1)]];
  assert.equal(coverageWithin(sq, box(-5, -5, 5, 5))(box(1, 0, 2, 1)), false);
  assert.equal(coverageWithin(sq, box(-5, -5, 5, 5))(box(1, 1, 2, 2)), false);
  // A box in a hole is not covered; an island in the hole is.
  const holed: Coverage = [[square(0, 0, 10, 10), square(2, 2, 8, 8)], [square(4, 4, 6, 6)]];
  const h = coverageWithin(holed, box(0, 0, 10, 10));
  assert.equal(h(box(2.5, 2.5, 3.5, 3.5)), false, 'in the hole');
  assert.equal(h(box(4.5, 4.5, 5.5, 5.5)), true, 'on the island');
  assert.equal(h(box(7.5, 7.5, 8.5, 8.5)), true, 'across the hole’s edge');
  // Clipped to an area first, a box outside that area still answers from what is inside it.
  assert.equal(coverageWithin(sq, box(0, 0, 0.5, 0.5))(box(0.6, 0.6, 0.9, 0.9)), false);
});

test('a coverage in a request: GeoJSON shapes read, bad ones named by field, the bbox taken from its bounds', () => {
  const base = { sourcesFile: 's.yaml', sourceName: 'a', zoom: 5, output: 'a.tif' };
  const poly = { type: 'Polygon', coordinates: [square(6, 45, 8, 47)] };
  const r = parseMosaicRequest({ ...base, coverage: { type: 'Feature', properties: null, geometry: poly } });
  assert.deepEqual(r.bbox, [6, 45, 8, 47]);
  assert.deepEqual(r.coverage, [[square(6, 45, 8, 47)]]);
  // Given both, the bbox stays as given.
  assert.deepEqual(parseMosaicRequest({ ...base, bbox: [6.5, 45, 7, 46], coverage: poly }).bbox, [6.5, 45, 7, 46]);
  const multi = parseMosaicRequest({ ...base, coverage: { type: 'MultiPolygon', coordinates: [[square(6, 45, 7, 46)], [square(9, 45, 10, 46)]] } });
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
  assert.throws(() => parseMosaicRequest({ ...base, coverage: { type: 'Polygon', coordinates: [square(190, 45, 200, 47)] } }), /coverage: must lie within longitude -180\.\.180/);
  const huge = { type: 'Polygon', coordinates: [[...Array.from({ length: 20_001 }, (_, k) => [6 + k / 1e5, 45 + (k % 2) / 10]), [6, 45]]] };
  assert.throws(() => parseMosaicRequest({ ...base, coverage: huge }), /coverage: has 20002 positions, more than 20000; simplify it/);
});
