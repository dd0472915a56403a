/**
 * A request's coverage as GeoJSON gives it: a Polygon or MultiPolygon, or a Feature or FeatureCollection of
 * them, in the request's CRS. Checked and read into polygons here, Node-free, for the client and the planner.
 */
import { z } from 'zod';
import type { Coverage, Polygon } from '../geo/coverage';

/**
 * Every position of a coverage rides in the plan, and the plan in every fetch batch's input in the mosaic's
 * history: 2,000 positions are about 80 KB a copy, so a block of 32 batches stays a few MB.
 */
export const MAX_COVERAGE_POSITIONS = 2_000;

const position = z
  .array(z.number().refine(Number.isFinite, 'must be a finite number'))
  .min(2, 'a position needs x and y');
const ring = z
  .array(position)
  .min(4, 'a ring needs at least 4 positions (its first repeated last)')
  .refine(
    (r) => r.length < 4 || (r[0]![0] === r.at(-1)![0] && r[0]![1] === r.at(-1)![1]),
    'a ring must end where it starts',
  );
const polygon = z.array(ring).min(1, 'a polygon needs its outer ring');
const polygonGeometry = z.looseObject({ type: z.literal('Polygon'), coordinates: polygon });
const multiPolygonGeometry = z.looseObject({
  type: z.literal('MultiPolygon'),
  coordinates: z.array(polygon).min(1, 'needs a polygon'),
});
const geometry = z.discriminatedUnion('type', [polygonGeometry, multiPolygonGeometry], {
  error: 'must be a GeoJSON Polygon or MultiPolygon',
});
const feature = z.looseObject({ type: z.literal('Feature'), geometry });

/**
 * The values in a coverage (every array element and object field, at any depth), counted before anything else
 * is checked and only up to `limit`: a forged one of millions gets one short error, not one per bad value.
 */
function valuesWithin(v: unknown, limit: number): number {
  let n = 0;
  const walk = (x: unknown, depth: number): void => {
    if (n > limit || depth > 8 || typeof x !== 'object' || x === null) return;
    const children = Array.isArray(x) ? x : Object.values(x);
    n += children.length;
    for (const c of children) walk(c, depth + 1);
  };
  walk(v, 0);
  return n;
}

/** A position is three values (the pair and its array), a ring a few more: room for MAX_COVERAGE_POSITIONS and the rest of a document. */
const MAX_COVERAGE_VALUES = MAX_COVERAGE_POSITIONS * 3 + 2_000;

const shapes = z
  .discriminatedUnion(
    'type',
    [
      polygonGeometry,
      multiPolygonGeometry,
      feature,
      z.looseObject({ type: z.literal('FeatureCollection'), features: z.array(feature).min(1, 'needs a feature') }),
    ],
    {
      error: 'must be a GeoJSON Polygon or MultiPolygon, or a Feature or FeatureCollection of them',
    },
  )
  .transform((g, ctx): Coverage => {
    const geometries =
      g.type === 'FeatureCollection' ? g.features.map((f) => f.geometry) : g.type === 'Feature' ? [g.geometry] : [g];
    const polygons = geometries.flatMap((x) => (x.type === 'Polygon' ? [x.coordinates] : x.coordinates));
    const positions = polygons.reduce((n, p) => n + p.reduce((m, r) => m + r.length, 0), 0);
    if (positions > MAX_COVERAGE_POSITIONS) {
      ctx.addIssue({
        code: 'custom',
        message: `has ${positions} positions, more than ${MAX_COVERAGE_POSITIONS}; simplify it (ogr2ogr -simplify, mapshaper)`,
        input: undefined,
      });
      return z.NEVER;
    }
    // x and y only: a third coordinate (height) has no part in what is covered.
    return polygons.map((p): Polygon => p.map((r) => r.map(([x, y]) => [x!, y!])));
  });

export const coverageSchema = z
  .unknown()
  .superRefine((g, ctx) => {
    if (valuesWithin(g, MAX_COVERAGE_VALUES) > MAX_COVERAGE_VALUES) {
      ctx.addIssue({
        code: 'custom',
        message: `has more than ${MAX_COVERAGE_POSITIONS} positions; simplify it (ogr2ogr -simplify, mapshaper)`,
        input: undefined,
      });
    }
  })
  .pipe(shapes);
