/**
 * The demo map's data: Natural Earth's land, coastlines and country borders (world-atlas's TopoJSON), projected
 * once per process and scale into world units of spherical Web Mercator, each shape with the bounding boxes
 * that let a tile skip what lies far from it.
 */
import { readFileSync } from 'node:fs';
import { feature, mesh } from 'topojson-client';
import type { GeometryCollection, Topology } from 'topojson-specification';
import { MAX_LATITUDE } from '../geo/mercator';

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
export interface Shape {
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

export interface World {
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
export const chunkPoints = (c: number, n: number): [number, number] => [c * CHUNK, Math.min(c * CHUNK + CHUNK, n - 1)];
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
