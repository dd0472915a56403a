/**
 * A request's coverage as GeoJSON gives it: a Polygon or MultiPolygon, or a Feature or FeatureCollection of
 * them, in the request's CRS. Checked and read into polygons here, Node-free, for the client and the planner.
 */
import { z } from 'zod';
import type { Coverage, Polygon } from '../geo/coverage';

/** Every position of a coverage rides in the plan, and so in the mosaic's history: a few hundred KB at most. */
export const MAX_COVERAGE_POSITIONS = 20_000;

const position = z.array(z.number().refine(Number.isFinite, 'must be a finite number')).min(2, 'a position needs x and y');
const ring = z
  .array(position)
  .min(4, 'a ring needs at least 4 positions (its first repeated last)')
  .refine((r) => r[0]![0] === r.at(-1)![0] && r[0]![1] === r.at(-1)![1], 'a ring must end where it starts');
const polygon = z.array(ring).min(1, 'a polygon needs its outer ring');
const polygonGeometry = z.looseObject({ type: z.literal('Polygon'), coordinates: polygon });
const multiPolygonGeometry = z.looseObject({ type: z.literal('MultiPolygon'), coordinates: z.array(polygon).min(1, 'needs a polygon') });
const geometry = z.discriminatedUnion('type', [polygonGeometry, multiPolygonGeometry], { error: 'must be a GeoJSON Polygon or MultiPolygon' });
const feature = z.looseObject({ type: z.literal('Feature'), geometry });

export const coverageSchema = z
  .discriminatedUnion('type', [polygonGeometry, multiPolygonGeometry, feature, z.looseObject({ type: z.literal('FeatureCollection'), features: z.array(feature).min(1, 'needs a feature') })], {
    error: 'must be a GeoJSON Polygon or MultiPolygon, or a Feature or FeatureCollection of them',
  })
  .transform((g, ctx): Coverage => {
    const geometries = g.type === 'FeatureCollection' ? g.features.map((f) => f.geometry) : g.type === 'Feature' ? [g.geometry] : [g];
    const polygons = geometries.flatMap((x) => (x.type === 'Polygon' ? [x.coordinates] : x.coordinates));
    const positions = polygons.reduce((n, p) => n + p.reduce((m, r) => m + r.length, 0), 0);
    if (positions > MAX_COVERAGE_POSITIONS) {
      ctx.addIssue({ code: 'custom', message: `has ${positions} positions, more than ${MAX_COVERAGE_POSITIONS}; simplify it (ogr2ogr -simplify, mapshaper)` });
      return z.NEVER;
    }
    // x and y only: a third coordinate (height) has no part in what is covered.
    return polygons.map((p): Polygon => p.map((r) => r.map(([x, y]) => [x!, y!])));
  });
