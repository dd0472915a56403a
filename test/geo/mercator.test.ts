import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  lonLatToMeters,
  lonLatToTile,
  MAX_LATITUDE,
  metersToLonLat,
  metersToTile,
  ORIGIN_SHIFT_M,
  resolution,
  tileBounds,
  tmsY,
} from '../../src/geo/mercator';

const close = (a: number, b: number, eps: number, what: string) =>
  assert.ok(Math.abs(a - b) <= eps, `${what}: ${a} vs ${b}`);

describe('web mercator', () => {
  test('the grid spans 20037508.342789244 m each way and ends at 85.0511287798066 degrees', () => {
    close(ORIGIN_SHIFT_M, 20037508.342789244, 1e-9, 'origin shift');
    close(MAX_LATITUDE, 85.0511287798066, 1e-12, 'max latitude');
    const [, y] = lonLatToMeters(0, MAX_LATITUDE);
    close(y, ORIGIN_SHIFT_M, 1e-6, 'y at max latitude');
  });

  test('resolution per zoom matches the published table (156543.03392804097 m/px at z0)', () => {
    close(resolution(0), 156543.03392804097, 1e-9, 'z0');
    close(resolution(1), 78271.51696402048, 1e-9, 'z1');
    close(resolution(10), 152.8740565703525, 1e-9, 'z10');
    close(resolution(18), 0.5971642834779395, 1e-12, 'z18');
  });

  test('tile bounds of known tiles, to the metre', () => {
    assert.deepEqual(tileBounds(0, 0, 0), {
      minX: -ORIGIN_SHIFT_M,
      maxX: ORIGIN_SHIFT_M,
      minY: -ORIGIN_SHIFT_M,
      maxY: ORIGIN_SHIFT_M,
    });
    const b = tileBounds(1, 1, 0);
    assert.deepEqual([b.minX, b.minY, b.maxX, b.maxY], [0, 0, ORIGIN_SHIFT_M, ORIGIN_SHIFT_M]);
    // Reference values from mercantile 1.2 (xy_bounds), a widely used independent implementation.
    const p = tileBounds(10, 518, 352); // Paris
    close(p.minX, 234814.55089206249, 1e-6, 'minX');
    close(p.maxX, 273950.3093740727, 1e-6, 'maxX');
    close(p.minY, 6222585.598639629, 1e-6, 'minY');
    close(p.maxY, 6261721.357121639, 1e-6, 'maxY');
    const sf = tileBounds(12, 655, 1583); // San Francisco
    close(sf.minX, -13629027.891360067, 1e-6, 'minX');
    close(sf.maxX, -13619243.951739565, 1e-6, 'maxX');
    close(sf.minY, 4539747.983913189, 1e-6, 'minY');
    close(sf.maxY, 4549531.923533691, 1e-6, 'maxY');
  });

  test('lon/lat to tile for known places', () => {
    assert.deepEqual(lonLatToTile(2.3522, 48.8566, 10), [518, 352]); // Paris
    assert.deepEqual(lonLatToTile(-122.4194, 37.7749, 12), [655, 1583]); // San Francisco
    assert.deepEqual(lonLatToTile(139.6917, 35.6895, 8), [227, 100]); // Tokyo
    assert.deepEqual(lonLatToTile(180, -90, 3), [7, 7], 'the far corner falls in the last tile');
  });

  test('metres and lon/lat round-trip', () => {
    for (const [lon, lat] of [
      [0, 0],
      [13.4, 52.52],
      [-70.1, -33.4],
      [179.9, 84.9],
    ] as const) {
      const [x, y] = lonLatToMeters(lon, lat);
      const [lon2, lat2] = metersToLonLat(x, y);
      close(lon2, lon, 1e-10, 'lon');
      close(lat2, lat, 1e-10, 'lat');
    }
    assert.deepEqual(metersToTile(0, 0, 1), [1, 1]);
  });

  test('TMS rows count from the bottom', () => {
    assert.equal(tmsY(10, 352), 671);
    assert.equal(tmsY(10, tmsY(10, 352)), 352);
  });

  test('bad tiles are refused with the field and the value', () => {
    assert.throws(() => tileBounds(3, 8, 0), /x must be an integer 0\.\.7 at zoom 3 \(got 8\)/);
    assert.throws(() => tileBounds(31, 0, 0), /z must be an integer 0\.\.30 \(got 31\)/);
    assert.throws(() => tileBounds(2, 0, -1), /y must be an integer 0\.\.3 at zoom 2 \(got -1\)/);
  });
});
