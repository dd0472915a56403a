/**
 * The mirror contract: a mirror may serve a tile its primary's breaker refuses only if it draws the same
 * grid in a format the pipeline decodes (`gridMismatch`, from the configuration alone) and its tiles look
 * like the primary's (`measureAgreement`, from sample tiles fetched from both). A mirror that breaks it is
 * never used, and the reason says why.
 */
import sharp from 'sharp';
import { tileUrl, type TileAddress } from '../../sources/request-url';
import { DECODED_FORMAT, type SourceConfig } from '../../sources/schema';
import { applyAuth, credentialValues } from '../http/credentials';
import { EndpointPools } from '../http/endpoint-pool';
import { fetchUrl } from '../http/fetch-url';
import { redirectPolicy } from '../http/redirects';
import { classify } from '../validate/classify';
import { LIMIT_INPUT_PIXELS } from '../validate/image-check';

/** A source and its name in the sources file (reasons name it). */
export interface NamedSource {
  name: string;
  source: SourceConfig;
}

// Tile matrix sets by the CRS of their grid. Every other source type is Web Mercator: the URL builder
// (src/sources/request-url.ts) addresses XYZ tiles and flips TMS rows itself, so XYZ and TMS share one grid.
const WEB_MERCATOR_SETS = [
  'googlemapscompatible',
  'webmercatorquad',
  'epsg:3857',
  'epsg:900913',
  'global_webmercator',
  'googlemercator',
];
const GEOGRAPHIC_SETS = ['worldcrs84quad', 'inspirecrs84quad', 'wgs1984quad', 'epsg:4326', 'crs:84', 'global_geodetic'];

/** The CRS `s` draws its tiles in, or null for a WMTS matrix set we cannot place. */
function crsOf(s: SourceConfig): string | null {
  // A grid of its own: compared as a whole below.
  if (s.grid) return s.grid.crs;
  switch (s.type) {
    case 'xyz':
    case 'tms':
      return 'EPSG:3857';
    case 'wms':
      // EPSG:900913 is the old code of the same projection and grid.
      return s.crs === 'EPSG:900913' ? 'EPSG:3857' : s.crs;
    case 'wmts-rest':
    case 'wmts-kvp': {
      const set = s.tileMatrixSet.toLowerCase();
      if (WEB_MERCATOR_SETS.includes(set)) return 'EPSG:3857';
      if (GEOGRAPHIC_SETS.includes(set)) return 'EPSG:4326';
      return null;
    }
  }
}

function describeCrs(s: SourceConfig): string {
  const crs = crsOf(s) ?? 'unknown';
  return s.type === 'wmts-rest' || s.type === 'wmts-kvp'
    ? `${crs} (matrix set ${JSON.stringify(s.tileMatrixSet)})`
    : crs;
}

/**
 * Null when `mirror` draws the same grid as `primary` (CRS, matrix set, tile size) in a format the pipeline
 * decodes, else the first difference, e.g. `mirror "osm-b": CRS EPSG:4326 differs from the primary's EPSG:3857`.
 * Pure: it reads the configuration only.
 */
export function gridMismatch(primary: SourceConfig, mirror: SourceConfig, mirrorName?: string): string | null {
  const who = mirrorName === undefined ? 'mirror' : `mirror ${JSON.stringify(mirrorName)}`;
  const [p, m] = [crsOf(primary), crsOf(mirror)];
  if (p === null || m === null) {
    // A matrix set we cannot place matches only the same set: two servers' unknown grids cannot be compared.
    const sameSet =
      (primary.type === 'wmts-rest' || primary.type === 'wmts-kvp') &&
      (mirror.type === 'wmts-rest' || mirror.type === 'wmts-kvp') &&
      primary.tileMatrixSet === mirror.tileMatrixSet;
    if (!sameSet)
      return `${who}: CRS ${describeCrs(mirror)} cannot be shown to match the primary's ${describeCrs(primary)}`;
  } else if (p !== m) {
    return `${who}: CRS ${describeCrs(mirror)} differs from the primary's ${describeCrs(primary)}`;
  }
  // The same CRS on two grids of their own must be the same grid: origin, resolutions and extent.
  if (
    (primary.grid || mirror.grid) &&
    JSON.stringify({ ...primary.grid, proj4: undefined }) !== JSON.stringify({ ...mirror.grid, proj4: undefined })
  ) {
    return `${who}: grid ${JSON.stringify(mirror.grid ?? 'Web Mercator')} differs from the primary's ${JSON.stringify(primary.grid ?? 'Web Mercator')}`;
  }
  if (mirror.tileSize !== primary.tileSize)
    return `${who}: tile size ${mirror.tileSize} differs from the primary's ${primary.tileSize}`;
  // PNG, JPEG and WebP all decode to the same pixels downstream; anything else the pipeline cannot use.
  if (!DECODED_FORMAT.test(primary.format))
    return `${who}: the primary's format ${primary.format} is not one the pipeline decodes (image/png, image/jpeg, image/webp)`;
  if (!DECODED_FORMAT.test(mirror.format))
    return `${who}: format ${mirror.format} is not one the pipeline decodes (image/png, image/jpeg, image/webp)`;
  return null;
}

/** How far a mirror's tiles may stray from the primary's and still agree (docs/sources.md has the figures). */
export interface AgreementTolerance {
  /**
   * Pixels are compared as the means of square blocks of this many pixels a side (1: pixel by pixel). On the
   * test fixture JPEG quality 75 moves up to 8.8 % of a tile's pixels by more than 16 levels (chroma
   * subsampling at hard colour edges) but no 4 x 4 block's mean by more than 32; a road in another colour
   * moves its blocks as much as its pixels.
   */
  blockSize: number;
  /** Largest mean absolute difference of any channel (R, G, B, alpha; 0-255) on any sample tile. */
  meanAbsDiff: number;
  /** Largest share (0-1) of a sample tile's blocks whose largest channel difference exceeds `threshold`. */
  differingShare: number;
  threshold: number;
}

/**
 * Chosen from measurements on the MapServer fixture (test/activities/mirror-contract.test.ts, docs/sources.md):
 * the same render as JPEG (MapServer's default quality 75) stays inside it, roads drawn in another colour
 * or left out do not.
 */
export const DEFAULT_TOLERANCE: AgreementTolerance = {
  blockSize: 4,
  meanAbsDiff: 3,
  differingShare: 0.01,
  threshold: 32,
};

export interface TileAgreement {
  tile: TileAddress;
  /** The channel (R, G, B or alpha) that differs most: its mean absolute difference, 0-255. */
  meanAbsDiff: number;
  differingShare: number;
}

export interface Agreement {
  /** Sample tiles compared (fewer than asked when the measurement stopped as inconclusive). */
  tiles: number;
  /** Mean over the compared tiles of each tile's `meanAbsDiff`. */
  meanAbsDiff: number;
  maxMeanAbsDiff: number;
  /** Share of all compared blocks that differ by more than the threshold. */
  differingShare: number;
  maxDifferingShare: number;
  agrees: boolean;
  /** Why not: a disagreement, or what made the measurement inconclusive. */
  reason?: string;
  perTile: TileAgreement[];
}

export interface AgreementOptions {
  tolerance?: Partial<AgreementTolerance>;
  /** Connection pools to use; by default a private set, closed at the end. */
  pools?: EndpointPools;
  env?: NodeJS.ProcessEnv;
  /**
   * The primary's sample tiles as fetched, by tile: measurements of several mirrors against one primary that
   * share it ask the primary for each sample once.
   */
  primarySamples?: Map<string, Promise<Pixels>>;
}

/** A sample tile as RGBA, or why there is none. */
type Pixels = { rgba: Buffer } | { reason: string };

/**
 * Fetches `tiles` from both sources (one tile at a time, both sides at once) and compares their pixels as
 * RGBA. Agrees only when the grids match and every sample tile is within tolerance. A failed fetch, a
 * response that is not a good tile (classified as the pipeline does) or no tiles at all make the
 * measurement inconclusive: agrees false, never a pass.
 */
export async function measureAgreement(
  primary: NamedSource,
  mirror: NamedSource,
  tiles: readonly TileAddress[],
  opts: AgreementOptions = {},
): Promise<Agreement> {
  const tol = { ...DEFAULT_TOLERANCE, ...opts.tolerance };
  if (!Number.isInteger(tol.blockSize) || tol.blockSize < 1)
    throw new RangeError(`tolerance.blockSize must be a whole number >= 1 (got ${tol.blockSize})`);
  const perTile: TileAgreement[] = [];
  const result = (reason?: string): Agreement => summarise(perTile, tol, reason);
  const grid = gridMismatch(primary.source, mirror.source, mirror.name);
  if (grid) return result(grid);
  if (tiles.length === 0) return result('inconclusive: no sample tiles');
  const pools = opts.pools ?? new EndpointPools();
  const primaryPixels = (tile: TileAddress): Promise<Pixels> => {
    const cache = opts.primarySamples;
    const key = tileName(tile);
    let p = cache?.get(key);
    if (!p) {
      p = fetchPixels(primary, tile, pools, opts.env);
      cache?.set(key, p);
    }
    return p;
  };
  try {
    for (const tile of tiles) {
      const [a, b] = await Promise.all([primaryPixels(tile), fetchPixels(mirror, tile, pools, opts.env)]);
      if ('reason' in a)
        return result(`inconclusive: primary ${JSON.stringify(primary.name)}: tile ${tileName(tile)}: ${a.reason}`);
      if ('reason' in b)
        return result(`inconclusive: mirror ${JSON.stringify(mirror.name)}: tile ${tileName(tile)}: ${b.reason}`);
      perTile.push({ tile, ...compare(a.rgba, b.rgba, mirror.source.tileSize, tol) });
    }
  } finally {
    if (!opts.pools) await pools.close();
  }
  const worst = perTile.find((t) => t.meanAbsDiff > tol.meanAbsDiff || t.differingShare > tol.differingShare);
  if (!worst) return result();
  return result(
    `mirror ${JSON.stringify(mirror.name)} disagrees with ${JSON.stringify(primary.name)} on tile ${tileName(worst.tile)}: ` +
      `mean abs diff ${worst.meanAbsDiff.toFixed(2)} (at most ${tol.meanAbsDiff}), ` +
      `${pct(worst.differingShare)} of ${tol.blockSize === 1 ? 'pixels' : `${tol.blockSize}x${tol.blockSize} blocks`} differ by more than ${tol.threshold} (at most ${pct(tol.differingShare)})`,
  );
}

function summarise(perTile: TileAgreement[], tol: AgreementTolerance, reason: string | undefined): Agreement {
  const n = perTile.length;
  const mean = (f: (t: TileAgreement) => number) => (n ? perTile.reduce((s, t) => s + f(t), 0) / n : 0);
  const max = (f: (t: TileAgreement) => number) => perTile.reduce((m, t) => Math.max(m, f(t)), 0);
  return {
    tiles: n,
    meanAbsDiff: mean((t) => t.meanAbsDiff),
    maxMeanAbsDiff: max((t) => t.meanAbsDiff),
    // Every tile has the same size (the grids match), so the mean of shares is the share of all blocks.
    differingShare: mean((t) => t.differingShare),
    maxDifferingShare: max((t) => t.differingShare),
    agrees:
      reason === undefined &&
      n > 0 &&
      perTile.every((t) => t.meanAbsDiff <= tol.meanAbsDiff && t.differingShare <= tol.differingShare),
    ...(reason !== undefined ? { reason } : {}),
    perTile,
  };
}

/** One tile of the source as RGBA at its tile size, or why not (no URL in the reason: a URL may carry a key). */
async function fetchPixels(
  { source }: NamedSource,
  tile: TileAddress,
  pools: EndpointPools,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Pixels> {
  const headers: Record<string, string> = { 'user-agent': source.userAgent, ...source.headers };
  let url: string;
  try {
    url = applyAuth(source.auth, tileUrl(source, tile), headers, env);
  } catch (err) {
    return { reason: (err as Error).message };
  }
  const slot = await pools.slot(source, url);
  let x: Awaited<ReturnType<typeof fetchUrl>>;
  try {
    x = await fetchUrl(url, {
      dispatcher: pools.for(source),
      headers,
      signal: AbortSignal.timeout(source.timeouts.totalMs),
      redirects: redirectPolicy(source),
      ...(source.auth ? { auth: source.auth } : {}),
    });
  } finally {
    slot?.release();
  }
  if (x.error) return { reason: `no tile: ${x.error.code}` };
  // The pipeline's own judgement: a ServiceException, an error page or a wrong size is no sample.
  const verdict = await classify(x, {
    width: source.tileSize,
    height: source.tileSize,
    blankIsFailure: source.blankTiles === 'fail',
    secrets: credentialValues(source.auth, env),
  });
  if (verdict.kind !== 'success') return { reason: `${verdict.kind}: ${verdict.reason}` };
  try {
    const { data, info } = await sharp(x.body, { limitInputPixels: LIMIT_INPUT_PIXELS })
      .toColourspace('srgb')
      .ensureAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 4 || info.width !== source.tileSize || info.height !== source.tileSize)
      return {
        reason: `decoded to ${info.width}x${info.height}x${info.channels}, not RGBA ${source.tileSize}x${source.tileSize}`,
      };
    return { rgba: data };
  } catch (err) {
    return { reason: `undecodable image: ${(err as Error).message.split('\n')[0]}` };
  }
}

/**
 * On blocks of `tol.blockSize` pixels a side: the mean absolute difference of each channel (the largest of
 * R, G, B, alpha) and the share of blocks whose largest channel difference exceeds `tol.threshold`. Colours
 * are premultiplied by alpha: a transparent pixel is the same whatever colour it carries.
 */
function compare(
  a: Buffer,
  b: Buffer,
  size: number,
  tol: AgreementTolerance,
): { meanAbsDiff: number; differingShare: number } {
  const [pa, pb] = [blockMeans(a, size, tol.blockSize), blockMeans(b, size, tol.blockSize)];
  const sums = [0, 0, 0, 0];
  let differing = 0;
  const blocks = pa.length / 4;
  for (let i = 0; i < pa.length; i += 4) {
    let worst = 0;
    for (let c = 0; c < 4; c++) {
      const d = Math.abs(pa[i + c]! - pb[i + c]!);
      sums[c]! += d;
      worst = Math.max(worst, d);
    }
    if (worst > tol.threshold) differing++;
  }
  return { meanAbsDiff: Math.max(...sums.map((s) => s / blocks)), differingShare: differing / blocks };
}

/** Premultiplied RGBA means of `block` x `block` squares of a `size` x `size` RGBA image (edge blocks may be smaller). */
function blockMeans(rgba: Buffer, size: number, block: number): Float64Array {
  const n = Math.ceil(size / block);
  const sums = new Float64Array(n * n * 4);
  const counts = new Float64Array(n * n);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 4;
      const k = Math.floor(y / block) * n + Math.floor(x / block);
      const alpha = rgba[i + 3]!;
      for (let c = 0; c < 3; c++) sums[k * 4 + c]! += (rgba[i + c]! * alpha) / 255;
      sums[k * 4 + 3]! += alpha;
      counts[k]! += 1;
    }
  }
  for (let k = 0; k < n * n; k++) for (let c = 0; c < 4; c++) sums[k * 4 + c]! /= counts[k]!;
  return sums;
}

function tileName(t: TileAddress): string {
  return `${t.z}/${t.x}/${t.y}`;
}

function pct(share: number): string {
  return `${(share * 100).toFixed(share < 0.01 ? 2 : 1)}%`;
}
