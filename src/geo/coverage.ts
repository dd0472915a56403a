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
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++)
    sum += (ring[j]![0] - ring[i]![0]) * (ring[j]![1] + ring[i]![1]);
  return Math.abs(sum) / 2;
}

/** A ring ready for rowAreas: its y-range, and +1 or -1 so that its area counts positive (an outer ring) or negative (a hole). */
export interface PreparedRing {
  points: Ring;
  factor: number;
  minY: number;
  maxY: number;
}

/** The coverage's rings for rowAreas; rings with no area (all on one line) are left out. */
export function prepareCoverage(c: Coverage): PreparedRing[] {
  const out: PreparedRing[] = [];
  for (const polygon of c) {
    polygon.forEach((ring, r) => {
      let turn = 0;
      let [minY, maxY] = [Infinity, -Infinity];
      for (let i = 0; i < ring.length; i++) {
        const [xa, ya] = ring[i]!;
        const [xb, yb] = ring[(i + 1) % ring.length]!;
        turn += (xb - xa) * (ya + yb);
        [minY, maxY] = [Math.min(minY, ya), Math.max(maxY, ya)];
      }
      if (turn !== 0) out.push({ points: ring, factor: Math.sign(turn) * (r === 0 ? 1 : -1), minY, maxY });
    });
  }
  return out;
}

/**
 * How much of each tile of one row the coverage covers: the row is the band `minY..maxY`, its tiles `cols`
 * boxes of width `w` from `x0`. Each ring is clipped to the band only (two sides); then each of its edges adds
 * the integral of its height above the band's floor over the x it spans to the columns there. For a closed
 * ring, those integrals sum, at every x, to the length of the ring's inside on that vertical line, so a
 * column's sum is the ring's area in that tile (signed by the ring's turn, which `factor` undoes). Whole columns
 * under an edge get their share through running sums, so a row costs the vertices of the rings that reach it
 * plus its columns, not their product.
 */
export function rowAreas(
  rings: readonly PreparedRing[],
  x0: number,
  w: number,
  cols: number,
  minY: number,
  maxY: number,
): Float64Array {
  const out = new Float64Array(cols);
  // Running sums for whole columns: column k gets alpha + beta * k.
  const alpha = new Float64Array(cols + 1);
  const beta = new Float64Array(cols + 1);
  const band = { minX: -Infinity, maxX: Infinity, minY, maxY };
  for (const ring of rings) {
    if (ring.maxY <= minY || ring.minY >= maxY) continue;
    addColumns(clipRing(ring.points, band), ring.factor, x0, w, cols, minY, out, alpha, beta);
  }
  let [sa, sb] = [0, 0];
  for (let k = 0; k < cols; k++) {
    sa += alpha[k]!;
    sb += beta[k]!;
    out[k]! += sa + sb * k;
  }
  return out;
}

function addColumns(
  ring: Ring,
  factor: number,
  x0: number,
  w: number,
  cols: number,
  floor: number,
  out: Float64Array,
  alpha: Float64Array,
  beta: Float64Array,
): void {
  const end = cols * w;
  for (let i = 0; i < ring.length; i++) {
    const [xa, ya] = ring[i]!;
    const [xb, yb] = ring[(i + 1) % ring.length]!;
    if (xa === xb) continue;
    const [u1, v1, u2, v2] = [xa - x0, ya - floor, xb - x0, yb - floor];
    const dir = (u2 > u1 ? 1 : -1) * factor;
    const m = (v2 - v1) / (u2 - u1);
    const v = (u: number) => v1 + m * (u - u1);
    // Only the part over the row's columns counts.
    const lo = Math.max(0, Math.min(u1, u2));
    const hi = Math.min(end, Math.max(u1, u2));
    if (!(hi > lo)) continue;
    const add = (k: number, a: number, b: number) => {
      if (b > a) out[k]! += dir * (b - a) * v((a + b) / 2);
    };
    const kLo = Math.min(cols - 1, Math.floor(lo / w));
    // An edge narrower than float steps can put its ends on one boundary: never a column before the first.
    const kHi = Math.max(kLo, Math.min(cols - 1, Math.ceil(hi / w) - 1));
    if (kLo === kHi) {
      add(kLo, lo, hi);
      continue;
    }
    add(kLo, lo, Math.min(hi, (kLo + 1) * w));
    add(kHi, Math.max(lo, kHi * w), hi);
    if (kHi - kLo > 1) {
      // Column k (whole): w * v((k + 0.5) w) = w (v1 - m u1 + m w / 2) + w m w k.
      const a = dir * w * (v1 - m * u1 + (m * w) / 2);
      const b = dir * w * m * w;
      alpha[kLo + 1]! += a;
      alpha[kHi]! -= a;
      beta[kLo + 1]! += b;
      beta[kHi]! -= b;
    }
  }
}

/** A covered tile has at least this share of its area inside: rounding must not make a tile that only touches the coverage covered. */
export const COVERED_SHARE = 1e-6;
