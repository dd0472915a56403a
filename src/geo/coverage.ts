/**
 * A coverage: the area a mosaic or seed is restricted to, as polygons (an outer ring, then its holes) in one
 * CRS. A tile is covered when the part of it inside the coverage has an area: a tile that only touches the
 * coverage's edge or a corner is not. Pure.
 */
import type { Bounds } from './mercator';

export type Position = [number, number];
/** A closed ring: its first and last positions are the same. */
export type Ring = Position[];
/** The outer ring first, then the holes. */
export type Polygon = Ring[];
export type Coverage = Polygon[];

/** The bounds of every outer ring. */
export function coverageBounds(c: Coverage): Bounds {
  let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const polygon of c) {
    for (const [x, y] of polygon[0] ?? []) {
      minX = Math.min(minX, x);
      maxX = Math.max(maxX, x);
      minY = Math.min(minY, y);
      maxY = Math.max(maxY, y);
    }
  }
  return { minX, minY, maxX, maxY };
}

/** Every position through `f` (a reprojection): the rings keep their vertices, not their curvature. */
export function mapCoverage(c: Coverage, f: (p: Position) => Position): Coverage {
  return c.map((polygon) => polygon.map((ring) => ring.map(f)));
}

/**
 * The ring clipped to the box (Sutherland-Hodgman, one side at a time). A concave ring leaves zero-area
 * slivers along the box's sides where it wraps around the box, which add nothing to the area below.
 */
export function clipRing(ring: Ring, b: Bounds): Ring {
  let out: Position[] = ring;
  const sides: [(p: Position) => boolean, (a: Position, c: Position) => Position][] = [
    [(p) => p[0] >= b.minX, (a, c) => at(a, c, c[0] === a[0] ? 0 : (b.minX - a[0]) / (c[0] - a[0]))],
    [(p) => p[0] <= b.maxX, (a, c) => at(a, c, c[0] === a[0] ? 0 : (b.maxX - a[0]) / (c[0] - a[0]))],
    [(p) => p[1] >= b.minY, (a, c) => at(a, c, c[1] === a[1] ? 0 : (b.minY - a[1]) / (c[1] - a[1]))],
    [(p) => p[1] <= b.maxY, (a, c) => at(a, c, c[1] === a[1] ? 0 : (b.maxY - a[1]) / (c[1] - a[1]))],
  ];
  for (const [inside, cross] of sides) {
    if (out.length === 0) return [];
    const next: Position[] = [];
    for (let i = 0; i < out.length; i++) {
      const cur = out[i]!;
      const prev = out[(i + out.length - 1) % out.length]!;
      if (inside(cur)) {
        if (!inside(prev)) next.push(cross(prev, cur));
        next.push(cur);
      } else if (inside(prev)) {
        next.push(cross(prev, cur));
      }
    }
    out = next;
  }
  return out;
}

const at = (a: Position, c: Position, t: number): Position => [a[0] + (c[0] - a[0]) * t, a[1] + (c[1] - a[1]) * t];

/** A ring's area (shoelace), whichever way it turns. */
export function ringArea(ring: Ring): number {
  let sum = 0;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) sum += (ring[j]![0] - ring[i]![0]) * (ring[j]![1] + ring[i]![1]);
  return Math.abs(sum) / 2;
}

const overlaps = (a: Bounds, b: Bounds) => a.minX < b.maxX && a.maxX > b.minX && a.minY < b.maxY && a.maxY > b.minY;

/** The area of the coverage inside the box. */
export function areaWithin(c: Coverage, b: Bounds): number {
  let area = 0;
  for (const [outer, ...holes] of c) {
    if (!outer) continue;
    const inOuter = ringArea(clipRing(outer, b));
    if (inOuter === 0) continue;
    area += inOuter - holes.reduce((sum, h) => sum + ringArea(clipRing(h, b)), 0);
  }
  return area;
}

/**
 * Which boxes the coverage covers, for many boxes inside one area (a row of tiles, a batch): the coverage is
 * clipped to `area` once, so each box costs the vertices near it, not the whole coverage's.
 */
export function coverageWithin(c: Coverage, area: Bounds): (box: Bounds) => boolean {
  const near: { polygon: Polygon; bounds: Bounds }[] = [];
  for (const polygon of c) {
    const clipped = polygon.map((ring) => clipRing(ring, area));
    if (!clipped[0] || ringArea(clipped[0]) === 0) continue;
    near.push({ polygon: clipped.filter((r) => r.length > 0), bounds: coverageBounds([clipped]) });
  }
  return (box) => {
    // Rounding in the clip must not make a box that only touches the coverage count as covered.
    const least = (box.maxX - box.minX) * (box.maxY - box.minY) * 1e-9;
    let area = 0;
    for (const { polygon, bounds } of near) if (overlaps(bounds, box)) area += areaWithin([polygon], box);
    return area > least;
  };
}
