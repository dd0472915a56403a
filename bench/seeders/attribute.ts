/**
 * When two tools' tiles differ, is it the tools or the server? For a differing tile, find the GetMap each tool
 * sent that covers it (the proxy keeps every query string), send both again straight to lighttpd, cut the tile
 * out of each answer, and check that each re-render equals that tool's stored tile: then the difference is the
 * server drawing the two requests differently, and the two requests are compared parameter by parameter.
 */
import sharp from 'sharp';
import { resolution, tileBounds } from '../../src/geo/mercator';
import { diff, type Decoded, decode } from './compare';

interface Req {
  query: string;
  bbox: [number, number, number, number];
  width: number;
  height: number;
}

const param = (q: URLSearchParams, k: string) => {
  for (const [key, v] of q) if (key.toUpperCase() === k) return v;
  return undefined;
};

function parse(query: string): Req | null {
  const q = new URLSearchParams(query);
  const bbox = param(q, 'BBOX')?.split(',').map(Number);
  if (!bbox || bbox.length !== 4 || bbox.some((v) => !Number.isFinite(v))) return null;
  return { query, bbox: bbox as Req['bbox'], width: Number(param(q, 'WIDTH')), height: Number(param(q, 'HEIGHT')) };
}

/** The request whose bbox holds the tile's centre, and the tile's pixel offset in its image. */
function covering(queries: string[], z: number, x: number, y: number): { req: Req; left: number; top: number } | null {
  const t = tileBounds(z, x, y);
  const cx = (t.minX + t.maxX) / 2;
  const cy = (t.minY + t.maxY) / 2;
  const res = resolution(z);
  for (const query of queries) {
    const req = parse(query);
    if (!req) continue;
    const [minX, minY, maxX, maxY] = req.bbox;
    if (cx > minX && cx < maxX && cy > minY && cy < maxY)
      return { req, left: Math.round((t.minX - minX) / res), top: Math.round((maxY - t.maxY) / res) };
  }
  return null;
}

async function render(base: string, c: { req: Req; left: number; top: number }): Promise<Decoded> {
  const res = await fetch(`${base}?${c.req.query}`);
  const body = Buffer.from(await res.arrayBuffer());
  const { data, info } = await sharp(body)
    .extract({ left: c.left, top: c.top, width: 256, height: 256 })
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { png: true, kind: '', width: info.width, height: info.height, rgba: data };
}

/** Parameters (case-insensitive names) whose values differ; BBOX as the largest coordinate difference. */
function paramDiff(a: Req, b: Req): string {
  const qa = new URLSearchParams(a.query);
  const qb = new URLSearchParams(b.query);
  const norm = (q: URLSearchParams) => new Map([...q].map(([k, v]) => [k.toUpperCase(), v]));
  const ma = norm(qa);
  const mb = norm(qb);
  const out: string[] = [];
  for (const k of new Set([...ma.keys(), ...mb.keys()])) {
    const va = ma.get(k);
    const vb = mb.get(k);
    if (k === 'BBOX') {
      const d = Math.max(...a.bbox.map((v, i) => Math.abs(v - b.bbox[i]!)));
      out.push(
        `BBOX ${va} vs ${vb} (largest difference ${d.toExponential(1)} m = ${(d / ((a.bbox[2] - a.bbox[0]) / a.width)).toExponential(1)} px)`,
      );
    } else if ((va ?? '').toLowerCase() !== (vb ?? '').toLowerCase())
      out.push(`${k}=${va ?? '(none)'} vs ${vb ?? '(none)'}`);
  }
  return out.join('; ');
}

export interface Attribution {
  tile: string;
  /** Each re-render equals that tool's stored tile. */
  reproduced: boolean;
  /** The two re-renders differ (the server draws the two requests differently). */
  serverDiffers: boolean;
  /** a's request with b's BBOX string in place of its own draws b's tile: the BBOX digits alone decide. */
  bboxDecides: boolean;
  /** The largest coordinate difference between the two BBOXes, in metres. */
  bboxDiffM: number;
  /** Same WIDTH/HEIGHT and BBOXes within 1/1000 px: the same GetMap but for how the numbers are written. */
  sameGeometry: boolean;
  params: string;
}

export async function attribute(
  wmsUrl: string,
  z: number,
  x: number,
  y: number,
  a: { queries: string[]; file: string },
  b: { queries: string[]; file: string },
): Promise<Attribution | null> {
  const ca = covering(a.queries, z, x, y);
  const cb = covering(b.queries, z, x, y);
  if (!ca || !cb) return null;
  const [ra, rb, sa, sb] = await Promise.all([render(wmsUrl, ca), render(wmsUrl, cb), decode(a.file), decode(b.file)]);
  const qa = new URLSearchParams(ca.req.query);
  for (const k of [...qa.keys()]) if (k.toUpperCase() === 'BBOX') qa.delete(k);
  qa.set('BBOX', param(new URLSearchParams(cb.req.query), 'BBOX')!);
  const swapped = await render(wmsUrl, { ...ca, req: { ...ca.req, query: qa.toString() } });
  return {
    bboxDecides: diff(swapped, rb).maxAbs === 0,
    bboxDiffM: Math.max(...ca.req.bbox.map((v, i) => Math.abs(v - cb.req.bbox[i]!))),
    sameGeometry:
      ca.req.width === cb.req.width &&
      ca.req.height === cb.req.height &&
      Math.max(...ca.req.bbox.map((v, i) => Math.abs(v - cb.req.bbox[i]!))) < resolution(z) / 1000,
    tile: `${z}/${x}/${y}`,
    reproduced: diff(ra, sa).maxAbs === 0 && diff(rb, sb).maxAbs === 0,
    serverDiffers: diff(ra, rb).maxAbs !== 0,
    params: paramDiff(ca.req, cb.req),
  };
}
