/**
 * The demo map's shapes cut to one tile: rings (land) clipped to the tile and its margin as closed SVG paths,
 * lines (coasts, borders) cut segment by segment, each in the tile's pixels.
 */
import { TILE_SIZE } from '../geo/mercator';
import { chunkPoints, type Shape } from './world-data';

/** The tile: where it is in world pixels, and the part of the world (in world units) it draws. */
export interface View {
  /** Pixels per world unit. */
  scale: number;
  /** The tile's north-west corner, in world pixels. */
  left: number;
  top: number;
}

/** Shapes are clipped this many pixels outside the tile, so clipped edges and line ends never show. */
const MARGIN = 4;

/** The tile and its margin in a shape's own world units, for the copy of the shape shifted `shift` worlds east. */
interface Rect {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

function rectOf(v: View, shift: number): Rect {
  return {
    x0: (v.left - MARGIN) / v.scale - shift,
    x1: (v.left + TILE_SIZE + MARGIN) / v.scale - shift,
    y0: (v.top - MARGIN) / v.scale,
    y1: (v.top + TILE_SIZE + MARGIN) / v.scale,
  };
}

/** Which side(s) of the rect a point lies on: 0 inside, else bits for left, right, above, below. */
const outcode = (r: Rect, x: number, y: number) =>
  (x < r.x0 ? 1 : x > r.x1 ? 2 : 0) | (y < r.y0 ? 4 : y > r.y1 ? 8 : 0);

const fmt = (n: number) => String(Math.round(n * 10) / 10);

/**
 * A ring as tile pixels, clipped to the tile and its margin. First every run of points on the same outside
 * side of the tile shrinks to its two ends: the run and the chord between its ends lie in one convex region
 * outside the tile, so no point of the tile changes its winding number (whole chunks go in one step). Then
 * Sutherland-Hodgman clips what is left, one edge at a time.
 */
export function clipRing(s: Shape, shift: number, v: View): string {
  const p = s.pts;
  const kept = pointsNearTile(s, rectOf(v, shift));
  const [xs, ys] = clipToTile(
    kept.map((i) => (p[2 * i]! + shift) * v.scale - v.left),
    kept.map((i) => p[2 * i + 1]! * v.scale - v.top),
  );
  if (xs.length < 3) return '';
  let d = `M${fmt(xs[0]!)} ${fmt(ys[0]!)}`;
  for (let i = 1; i < xs.length; i++) d += `L${fmt(xs[i]!)} ${fmt(ys[i]!)}`;
  return `${d}Z`;
}

/**
 * The indices of the ring's points that clipping needs: every point inside `r`, and of each run of points on
 * the same outside side of it only the run's two ends.
 */
function pointsNearTile(s: Shape, r: Rect): number[] {
  const p = s.pts;
  const n = p.length / 2;
  const kept: number[] = [];
  let runCode = 0;
  let runStart = -1;
  let runEnd = -1;
  const flush = () => {
    if (runCode === 0) return;
    kept.push(runStart);
    if (runEnd !== runStart) kept.push(runEnd);
    runCode = 0;
  };
  const chunks = s.chunks.length / 4;
  for (let c = 0; c < chunks; c++) {
    const [from, to] = chunkPoints(c, n);
    const last = c === chunks - 1 ? to : to - 1;
    const ch = s.chunks;
    const code = outcode(r, ch[4 * c]!, ch[4 * c + 1]!);
    if (code !== 0 && code === outcode(r, ch[4 * c + 2]!, ch[4 * c + 3]!)) {
      // The whole chunk lies in one region outside the tile.
      if (code !== runCode) {
        flush();
        runCode = code;
        runStart = from;
      }
      runEnd = last;
      continue;
    }
    for (let i = from; i <= last; i++) {
      const pc = outcode(r, p[2 * i]!, p[2 * i + 1]!);
      if (pc !== 0 && pc === runCode) {
        runEnd = i;
        continue;
      }
      flush();
      if (pc === 0) kept.push(i);
      else [runCode, runStart, runEnd] = [pc, i, i];
    }
  }
  flush();
  return kept;
}

/** Sutherland-Hodgman: the polygon xs, ys (tile pixels) clipped to the tile and its margin, one edge at a time. */
function clipToTile(xs: number[], ys: number[]): [number[], number[]] {
  const lo = -MARGIN;
  const hi = TILE_SIZE + MARGIN;
  // Each pass keeps the side of one edge: x >= lo, x <= hi, y >= lo, y <= hi.
  for (const [axis, bound, keepAbove] of [
    [0, lo, true],
    [0, hi, false],
    [1, lo, true],
    [1, hi, false],
  ] as const) {
    const a = axis === 0 ? xs : ys;
    const b = axis === 0 ? ys : xs;
    const na: number[] = [];
    const nb: number[] = [];
    const m = a.length;
    if (m === 0) break;
    const inside = (t: number) => (keepAbove ? t >= bound : t <= bound);
    for (let i = 0; i < m; i++) {
      const j = (i + m - 1) % m;
      const [ai, bi, aj, bj] = [a[i]!, b[i]!, a[j]!, b[j]!];
      const inI = inside(ai);
      if (inI !== inside(aj)) {
        const t = (bound - aj) / (ai - aj);
        na.push(bound);
        nb.push(bj + t * (bi - bj));
      }
      if (inI) {
        na.push(ai);
        nb.push(bi);
      }
    }
    if (axis === 0) [xs, ys] = [na, nb];
    else [ys, xs] = [na, nb];
  }
  return [xs, ys];
}

/**
 * A line as tile pixels: the runs of segments that reach the tile, each cut to the tile and its margin.
 * Segments along the map's top or bottom edge are the data's cut at the pole, not a coast, and are left out.
 */
export function clipLine(s: Shape, shift: number, v: View): string {
  const r = rectOf(v, shift);
  const p = s.pts;
  const n = p.length / 2;
  const wx = (x: number) => fmt((x + shift) * v.scale - v.left);
  const wy = (y: number) => fmt(y * v.scale - v.top);
  let d = '';
  let open = false;
  for (let c = 0; c * 4 < s.chunks.length; c++) {
    const ch = s.chunks;
    if (ch[4 * c]! > r.x1 || ch[4 * c + 2]! < r.x0 || ch[4 * c + 1]! > r.y1 || ch[4 * c + 3]! < r.y0) {
      open = false;
      continue;
    }
    const [from, to] = chunkPoints(c, n);
    for (let i = from + 1; i <= to; i++) {
      const [xa, ya, xb, yb] = [p[2 * i - 2]!, p[2 * i - 1]!, p[2 * i]!, p[2 * i + 1]!];
      // The pole's cut lies on y 0 or 1, up to the projection's rounding.
      const atEdge = (ya <= EDGE && yb <= EDGE) || (ya >= 1 - EDGE && yb >= 1 - EDGE);
      // Each segment cut to the tile and its margin: at deep zooms a far end lies millions of pixels away,
      // where a renderer drops the line.
      const cut = atEdge ? null : clipSegment(xa, ya, xb, yb, r);
      if (cut) {
        const [t0, t1] = cut;
        if (!open || t0 > 0) d += `M${wx(xa + (xb - xa) * t0)} ${wy(ya + (yb - ya) * t0)}`;
        d += `L${wx(xa + (xb - xa) * t1)} ${wy(ya + (yb - ya) * t1)}`;
        open = t1 === 1;
      } else open = false;
    }
  }
  return d;
}

const EDGE = 1e-9;

/** Liang-Barsky: the part of segment a-b inside `r`, as [t0, t1] along it, or null when none is. */
function clipSegment(xa: number, ya: number, xb: number, yb: number, r: Rect): [number, number] | null {
  let t0 = 0;
  let t1 = 1;
  const dx = xb - xa;
  const dy = yb - ya;
  for (const [p, q] of [
    [-dx, xa - r.x0],
    [dx, r.x1 - xa],
    [-dy, ya - r.y0],
    [dy, r.y1 - ya],
  ] as const) {
    if (p === 0) {
      if (q < 0) return null;
      continue;
    }
    const t = q / p;
    if (p < 0) {
      if (t > t1) return null;
      if (t > t0) t0 = t;
    } else {
      if (t < t0) return null;
      if (t < t1) t1 = t;
    }
  }
  return [t0, t1];
}

/** The copies of a shape (shifted by whole worlds) that reach the tile. */
function copiesInView(s: Shape, v: View): number[] {
  return [-1, 0, 1].filter((k) => {
    const r = rectOf(v, k);
    return s.maxX >= r.x0 && s.minX <= r.x1 && s.maxY >= r.y0 && s.minY <= r.y1;
  });
}

/** The shapes that reach the tile, each cut by `clip`, as one SVG path. */
export function paths(shapes: Shape[], v: View, clip: (s: Shape, shift: number, v: View) => string): string {
  let d = '';
  for (const s of shapes) for (const k of copiesInView(s, v)) d += clip(s, k, v);
  return d;
}
