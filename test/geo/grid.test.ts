import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gridLevelSize, gridProblems, gridTileBounds, gridTileRange, type GridDef } from '../../src/geo/grid';

const lv95: GridDef = {
  crs: 'EPSG:2056',
  origin: [2_420_000, 1_350_000],
  resolutions: [4000, 1000, 100, 10, 0.1],
  extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
};

test('a level covers the extent: whole tiles from the origin, no column of float noise', () => {
  assert.deepEqual(gridLevelSize(lv95, 0, 256), { cols: 1, rows: 1 });
  // 480 km / 2.56 km = 187.5 columns, 320 km / 2.56 km = 125 rows.
  assert.deepEqual(gridLevelSize(lv95, 3, 256), { cols: 188, rows: 125 });
});

test("a tile's own bounds give back that tile, at every level, though the division is inexact", () => {
  for (let z = 0; z < lv95.resolutions.length; z++) {
    const { cols, rows } = gridLevelSize(lv95, z, 256);
    for (const [x, y] of [
      [0, 0],
      [3, 2],
      [cols - 1, rows - 1],
      [Math.floor(cols / 3), Math.floor(rows / 7)],
    ] as [number, number][]) {
      if (x >= cols || y >= rows) continue;
      const b = gridTileBounds(lv95, z, x, y, 256);
      assert.deepEqual(gridTileRange(lv95, b, z, 256), { xMin: x, xMax: x, yMin: y, yMax: y }, `z${z} ${x}/${y}`);
    }
  }
});

test('a box reaching beyond the grid is clamped to its tiles', () => {
  const r = gridTileRange(lv95, { minX: 2_000_000, minY: 0, maxX: 3_000_000, maxY: 2_000_000 }, 1, 256);
  assert.deepEqual(r, { xMin: 0, xMax: 1, yMin: 0, yMax: 1 });
});

test('levels with corners of their own: each level counts its tiles from its corner; origins are checked against the origin, the levels and the extent', () => {
  const g: GridDef = {
    crs: 'EPSG:2056',
    origin: [2_400_000, 1_360_000],
    origins: [
      [2_400_000, 1_360_000],
      [2_410_000, 1_352_000],
    ],
    resolutions: [100, 50],
    extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
  };
  assert.deepEqual(gridTileBounds(g, 0, 1, 1, 256), {
    minX: 2_425_600,
    maxX: 2_451_200,
    maxY: 1_334_400,
    minY: 1_308_800,
  });
  assert.deepEqual(gridTileBounds(g, 1, 1, 1, 256), {
    minX: 2_422_800,
    maxX: 2_435_600,
    maxY: 1_339_200,
    minY: 1_326_400,
  });
  assert.deepEqual(gridTileRange(g, { minX: 2_422_800, maxX: 2_435_600, minY: 1_326_400, maxY: 1_339_200 }, 1, 256), {
    xMin: 1,
    xMax: 1,
    yMin: 1,
    yMax: 1,
  });
  assert.deepEqual(gridLevelSize(g, 1, 256), { cols: Math.ceil(490_000 / 12_800), rows: Math.ceil(322_000 / 12_800) });
  assert.deepEqual(gridProblems(g), []);
  const paths = (d: GridDef) => gridProblems(d).map((p) => `${p.path.join('.')}: ${p.message}`);
  assert.deepEqual(paths({ ...g, origins: [g.origin] }), ['origins: must give one corner per resolution (2), got 1']);
  assert.match(
    paths({ ...g, origins: [[2_400_001, 1_360_000], g.origins![1]!] }).join('\n'),
    /origins\.0: must be the origin, level 0's corner/,
  );
  assert.match(
    paths({ ...g, origins: [g.origin, [2_430_000, 1_352_000]] }).join('\n'),
    /origins\.1: must be the top-left corner of the extent or beyond it/,
  );
});
