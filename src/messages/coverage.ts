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

const position = z.array(z.number().refine(Number.isFinite, 'must be a finite number')).min(2, 'a position needs x and y');
const ring = z
  .array(position)
  .min(4, 'a ring needs at least 4 positions (its first repeated last)')
  .refine((r) => r.length < 4 || (r[0]![0] === r.at(-1)![0] && r[0]![1] === r.at(-1)![1]), 'a ring must end where it starts');
const polygon = z.array(ring).min(1, 'a polygon needs its outer ring');
const polygonGeometry = z.looseObject({ type: z.literal('Polygon'), coordinates: polygon });
const multiPolygonGeometry = z.looseObject({ type: z.literal('MultiPolygon'), coordinates: z.array(polygon).min(1, 'needs a polygon') });
const geometry = z.discriminatedUnion('type', [polygonGeometry, multiPolygonGeometry], { error: 'must be a GeoJSON Polygon or MultiPolygon' });
const feature = z.looseObject({ type: z.literal('Feature'), geometry });

/** Positions in nested arrays, counted before anything else is checked: a huge coverage gets one short error, not one per position. */
function countPositions(v: unknown, depth = 0): number {
  if (!Array.isArray(v) || depth > 6) return 0;
  // A position is an array of values, whatever they are (bad ones are named later, if there are few).
  if (v.length > 0 && !Array.isArray(v[0])) return 1;
  let n = 0;
  for (const x of v) {
    n += countPositions(x, depth + 1);
    if (n > MAX_COVERAGE_POSITIONS) return n;
  }
  return n;
}

const positionsOf = (g: unknown): number => {
  if (typeof g !== 'object' || g === null) return 0;
  const o = g as { coordinates?: unknown; geometry?: { coordinates?: unknown }; features?: unknown };
  if (Array.isArray(o.features)) return o.features.reduce((n: number, f: unknown) => n + positionsOf(f), 0);
  return countPositions(o.coordinates ?? o.geometry?.coordinates);
};

const shapes = z
  .discriminatedUnion('type', [polygonGeometry, multiPolygonGeometry, feature, z.looseObject({ type: z.literal('FeatureCollection'), features: z.array(feature).min(1, 'needs a feature') })], {
    error: 'must be a GeoJSON Polygon or MultiPolygon, or a Feature or FeatureCollection of them',
  })
  .transform((g): Coverage => {
    const geometries = g.type === 'FeatureCollection' ? g.features.map((f) => f.geometry) : g.type === 'Feature' ? [g.geometry] : [g];
    const polygons = geometries.flatMap((x) => (x.type === 'Polygon' ? [x.coordinates] : x.coordinates));
    // x and y only: a third coordinate (height) has no part in what is covered.
    return polygons.map((p): Polygon => p.map((r) => r.map(([x, y]) => [x!, y!])));
  });

export const coverageSchema = z
  .unknown()
  .superRefine((g, ctx) => {
    const n = positionsOf(g);
    if (n > MAX_COVERAGE_POSITIONS) ctx.addIssue({ code: 'custom', message: `has more than ${MAX_COVERAGE_POSITIONS} positions; simplify it (ogr2ogr -simplify, mapshaper)`, input: undefined });
  })
  .pipe(shapes);
