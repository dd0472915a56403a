/**
 * The demo tile server's map: land, coastlines and country borders from Natural Earth (public domain), as
 * redistributed in TopoJSON by the world-atlas package (ISC), projected in spherical Web Mercator for each
 * 256 px XYZ tile and drawn as an SVG that sharp renders to PNG. Every tile is cut from the same world, so a
 * stitched mosaic is a correct map and a tile put in the wrong place shows.
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { feature, mesh } from 'topojson-client';
import type { GeometryCollection, Topology } from 'topojson-specification';
import { MAX_LATITUDE, TILE_SIZE } from '../geo/mercator';

/** Natural Earth's scales: 1:110m, 1:50m and 1:10m. */
export type WorldScale = '110m' | '50m' | '10m';

/**
 * The coarsest data that still looks right at a zoom: 1:10m costs ~0.6 s to load and more points to clip per
 * tile, but at zoom 6 and deeper 1:50m coasts and borders show straight runs tens of pixels long.
 */
export function scaleFor(z: number): WorldScale {
  return z <= 2 ? '110m' : z <= 5 ? '50m' : '10m';
}

/** A ring or line in world units (x, y in 0..1 from the north-west corner of the Mercator square). */
interface Shape {
  /** x0, y0, x1, y1, ...; x is unwrapped, so a shape that crosses the antimeridian runs past 0 or 1. */
  pts: Float64Array;
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
  /** minX, minY, maxX, maxY of each run of CHUNK segments: a tile skips the runs far from it in one test. */
  chunks: Float64Array;
}

const CHUNK = 32;

interface World {
  /** Land rings, outer and holes alike (filled even-odd); closed around the pole where a ring circles it. */
  land: Shape[];
  /** The land rings as they are in the data (no closure along the pole): the coastline. */
  coast: Shape[];
  /** Borders between two countries. */
  borders: Shape[];
}

type Position = number[];
type Atlas = Topology<{ land: GeometryCollection; countries: GeometryCollection }>;

const worlds = new Map<WorldScale, World>();

/** Loaded once per process and scale, on first use. */
export function world(scale: WorldScale): World {
  let w = worlds.get(scale);
  if (!w) {
    w = loadWorld(scale);
    worlds.set(scale, w);
  }
  return w;
}

function loadWorld(scale: WorldScale): World {
  const topo = JSON.parse(readFileSync(require.resolve(`world-atlas/countries-${scale}.json`), 'utf8')) as Atlas;
  const land = feature(topo, topo.objects.land);
  const rings: Position[][] = [];
  for (const f of land.features) {
    const g = f.geometry;
    if (g.type === 'Polygon') rings.push(...g.coordinates);
    else if (g.type === 'MultiPolygon') for (const p of g.coordinates) rings.push(...p);
  }
  const borders = mesh(topo, topo.objects.countries, (a, b) => a !== b);
  return {
    land: rings.map((r) => project(r, true)),
    coast: rings.map((r) => project(r, false)),
    borders: borders.coordinates.map((l) => project(l, false)),
  };
}

/**
 * Spherical Web Mercator into world units. Longitudes are unwrapped (a step of more than 180 degrees is a
 * crossing of the antimeridian, not a trip round the world), so the shape stays in one piece; a ring that
 * ends a full turn from where it began circles a pole (Antarctica) and, when `closeAtPole`, is closed along
 * the edge of the map on that side.
 */
function project(coords: Position[], closeAtPole: boolean): Shape {
  const out: number[] = [];
  let shift = 0;
  let prevLon = Number.NaN;
  let latSum = 0;
  for (const c of coords) {
    const lon = c[0]!;
    const lat = Math.max(-MAX_LATITUDE, Math.min(MAX_LATITUDE, c[1]!));
    if (lon - prevLon > 180) shift -= 360;
    else if (prevLon - lon > 180) shift += 360;
    prevLon = lon;
    latSum += lat;
    const phi = (lat * Math.PI) / 180;
    out.push((lon + shift + 180) / 360, 0.5 - Math.log(Math.tan(Math.PI / 4 + phi / 2)) / (2 * Math.PI));
  }
  if (closeAtPole && out.length >= 4 && Math.abs(out[out.length - 2]! - out[0]!) > 0.5) {
    const poleY = latSum < 0 ? 1.01 : -0.01;
    out.push(out[out.length - 2]!, poleY, out[0]!, poleY);
  }
  const pts = Float64Array.from(out);
  const n = pts.length / 2;
  const chunks = new Float64Array(Math.max(1, Math.ceil((n - 1) / CHUNK)) * 4);
  for (let c = 0; c * 4 < chunks.length; c++) {
    const [from, to] = chunkPoints(c, n);
    const b = bbox(pts, from, to);
    chunks.set(b, c * 4);
  }
  const [minX, minY, maxX, maxY] = bbox(pts, 0, n - 1);
  return { pts, minX, minY, maxX, maxY, chunks };
}

/** The first and last point of chunk `c` (neighbouring chunks share a point, so every segment is in one). */
const chunkPoints = (c: number, n: number): [number, number] => [c * CHUNK, Math.min(c * CHUNK + CHUNK, n - 1)];

function bbox(pts: Float64Array, from: number, to: number): [number, number, number, number] {
  let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
  for (let i = from; i <= to; i++) {
    minX = Math.min(minX, pts[2 * i]!);
    maxX = Math.max(maxX, pts[2 * i]!);
    minY = Math.min(minY, pts[2 * i + 1]!);
    maxY = Math.max(maxY, pts[2 * i + 1]!);
  }
  return [minX, minY, maxX, maxY];
}

/** The tile: where it is in world pixels, and the part of the world (in world units) it draws. */
interface View {
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
function clipRing(s: Shape, shift: number, v: View): string {
  const r = rectOf(v, shift);
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
  let xs = kept.map((i) => (p[2 * i]! + shift) * v.scale - v.left);
  let ys = kept.map((i) => p[2 * i + 1]! * v.scale - v.top);
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
  if (xs.length < 3) return '';
  let d = `M${fmt(xs[0]!)} ${fmt(ys[0]!)}`;
  for (let i = 1; i < xs.length; i++) d += `L${fmt(xs[i]!)} ${fmt(ys[i]!)}`;
  return `${d}Z`;
}

/**
 * A line as tile pixels: the runs of segments that reach the tile, each cut to the tile and its margin.
 * Segments along the map's top or bottom edge are the data's cut at the pole, not a coast, and are left out.
 */
function clipLine(s: Shape, shift: number, v: View): string {
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

function paths(shapes: Shape[], v: View, clip: (s: Shape, shift: number, v: View) => string): string {
  let d = '';
  for (const s of shapes) for (const k of copiesInView(s, v)) d += clip(s, k, v);
  return d;
}

/** Colours of one drawing of the map; `generation` shifts them a little, so a redraw changes every tile. */
function palette(generation: number): { water: string; land: string; coast: string; border: string; label: string } {
  const g = ((generation % 6) + 6) % 6;
  const hex = (r: number, gr: number, b: number) =>
    `#${[r, gr, b].map((c) => c.toString(16).padStart(2, '0')).join('')}`;
  return {
    water: hex(170 - g * 2, 211 - g, 223),
    land: hex(242 - g, 239 - g * 2, 233),
    coast: hex(120, 164, 186),
    border: hex(150, 120, 160),
    label: hex(80, 80, 80),
  };
}

// Strokes of each character of the label on a 3 x 5 grid: no font needed, the same glyphs on every machine.
const GLYPHS: Record<string, string> = {
  '0': 'M0 0H3V5H0Z',
  '1': 'M1.5 0V5',
  '2': 'M0 0H3V2.5H0V5H3',
  '3': 'M0 0H3V5H0M0 2.5H3',
  '4': 'M0 0V2.5H3M3 0V5',
  '5': 'M3 0H0V2.5H3V5H0',
  '6': 'M3 0H0V5H3V2.5H0',
  '7': 'M0 0H3V5',
  '8': 'M0 0H3V5H0ZM0 2.5H3',
  '9': 'M3 2.5H0V0H3V5H0',
  '/': 'M0 5L3 0',
};

/** The tile's address, z/x/y, small and faint in the top-left corner. */
function label(text: string, colour: string, top = 4): string {
  const d = [...text]
    .map((c, i) => `<path transform="translate(${4 + i * 6} ${top}) scale(1.2)" d="${GLYPHS[c] ?? ''}"/>`)
    .join('');
  return `<g fill="none" stroke="${colour}" stroke-opacity="0.45" stroke-width="0.8">${d}</g>`;
}

/** The SVG of tile z/x/y (XYZ scheme: y counts down from the north). */
export function tileSvg(z: number, x: number, y: number, generation = 0): string {
  const w = world(scaleFor(z));
  const n = 2 ** z;
  // Columns past either side of the world wrap round it, as the map does.
  const v: View = { scale: TILE_SIZE * n, left: (((x % n) + n) % n) * TILE_SIZE, top: y * TILE_SIZE };
  const c = palette(generation);
  const land = paths(w.land, v, clipRing);
  const coast = paths(w.coast, v, clipLine);
  const borders = paths(w.borders, v, clipLine);
  const borderWidth = z < 4 ? 0.8 : z < 8 ? 1.2 : 1.6;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${TILE_SIZE}" height="${TILE_SIZE}">`,
    `<rect width="${TILE_SIZE}" height="${TILE_SIZE}" fill="${c.water}"/>`,
    land ? `<path d="${land}" fill="${c.land}" fill-rule="evenodd"/>` : '',
    coast ? `<path d="${coast}" fill="none" stroke="${c.coast}" stroke-width="0.9" stroke-linejoin="round"/>` : '',
    borders
      ? `<path d="${borders}" fill="none" stroke="${c.border}" stroke-width="${borderWidth}" stroke-linejoin="round"/>`
      : '',
    label(`${z}/${x}/${y}`, c.label),
    // The drawing's number under it: the palette repeats, and a redraw must change every tile whatever its count.
    generation > 0 ? label(String(generation), c.label, 10) : '',
    '</svg>',
  ].join('');
}

/** Tile z/x/y as a PNG. */
export function renderTile(z: number, x: number, y: number, generation = 0): Promise<Buffer> {
  // A failure of the drawing rejects, as one of the render does: it must not throw out of a request handler.
  return Promise.resolve().then(() =>
    sharp(Buffer.from(tileSvg(z, x, y, generation)))
      .png()
      .toBuffer(),
  );
}
