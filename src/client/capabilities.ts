/**
 * Sources from a service's capabilities document: every named layer of a WMS (1.1.1 or 1.3.0) that draws in
 * EPSG:3857, and every layer and TileMatrixSet of a WMTS 1.0.0, its matrices turned into a source `grid` when
 * they are not Web Mercator's (a projected CRS, one top-left corner, resolutions from the scale denominators).
 * What cannot become a source is said in a note, never guessed. Each source is checked with the sources
 * schema before it is returned, so the file written is one tilebreaker reads.
 */
import { XMLParser } from 'fast-xml-parser';
import { epsgCode, GEOGRAPHIC_CRS, GEOGRAPHIC_GRID_CRS, KNOWN_CRS, northingFirst } from '../geo/crs';
import { ORIGIN_SHIFT_M, tileSpan } from '../geo/mercator';
import { parseSource, SOURCE_NAME, type SourceInput } from '../sources/schema';

export interface ImportedSources {
  sources: Record<string, SourceInput>;
  /** What was left out, and why. */
  notes: string[];
}

/** A WMTS matrix's metres per pixel: its scale denominator at OGC's standard pixel of 0.28 mm. */
const METRES_PER_SCALE = 0.00028;
/** Metres per degree on the equator of WGS 84 (2 pi 6378137 / 360), as WMTS's well-known scale sets count them. */
const METRES_PER_DEGREE = (2 * Math.PI * 6_378_137) / 360;
/** The formats taken, in order of preference, when a layer offers several. */
const PREFERRED_FORMATS = ['image/png', 'image/jpeg', 'image/webp'];

type Node = Record<string, unknown>;

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  removeNSPrefix: true,
  trimValues: true,
  processEntities: true,
  parseTagValue: false,
});

const list = (v: unknown): Node[] =>
  v === undefined || v === null ? [] : Array.isArray(v) ? (v as Node[]) : [v as Node];
const text = (v: unknown): string =>
  typeof v === 'string'
    ? v
    : typeof v === 'number'
      ? String(v)
      : v && typeof v === 'object' && '#text' in v
        ? String((v as Node)['#text'])
        : '';

/** A source name from a layer's identifier: letters, digits, ".", "_" and "-", unique in `taken`. */
function nameFor(id: string, taken: Record<string, unknown>): string {
  let base =
    id
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 56) || 'layer';
  if (!SOURCE_NAME.test(base)) base = `layer-${base}`.slice(0, 56);
  let name = base;
  for (let k = 2; name in taken; k++) name = `${base}-${k}`;
  return name;
}

/** `EPSG:<code>` from the forms capabilities use: EPSG:2056, urn:ogc:def:crs:EPSG::2056, http://www.opengis.net/def/crs/EPSG/0/2056. */
export function normaliseCrs(crs: string): string | null {
  const m = /EPSG(?::|::|\/\d+\/|:[\d.]*:)(\d{4,6})$/i.exec(crs.trim());
  return m ? `EPSG:${m[1]}` : null;
}

/** `from` without the GetCapabilities request's own parameters (SERVICE, REQUEST, VERSION, ...), keeping others such as map=. */
export function endpointOf(from: string): string {
  try {
    const url = new URL(from);
    for (const key of [...url.searchParams.keys()])
      if (/^(service|request|version|acceptversions|sections|updatesequence)$/i.test(key)) url.searchParams.delete(key);
    return url.toString();
  } catch {
    return from;
  }
}

export interface CapabilitiesOptions {
  /**
   * Use the URL the document was fetched from for GetMap and KVP GetTile requests, not the one it reports: a
   * server behind a proxy often reports its inside address.
   */
  useFetchedUrl?: boolean;
}

/** Sources from the capabilities document `xml`, fetched from `from` (used when the document names no URL). */
export function sourcesFromCapabilities(xml: string, from: string, opts: CapabilitiesOptions = {}): ImportedSources {
  let doc: Node;
  try {
    doc = parser.parse(xml) as Node;
  } catch {
    throw new Error(`capabilities: ${from} is not an XML document`);
  }
  if (doc.Capabilities) return fromWmts(doc.Capabilities as Node, from, opts);
  const wms = (doc.WMS_Capabilities ?? doc.WMT_MS_Capabilities) as Node | undefined;
  if (wms) return fromWms(wms, from, opts);
  throw new Error(
    `capabilities: ${from} is neither a WMS nor a WMTS capabilities document (its root is ${Object.keys(doc).filter((k) => !k.startsWith('?'))[0] ?? 'empty'})`,
  );
}

function fromWms(root: Node, from: string, opts: CapabilitiesOptions): ImportedSources {
  const version = text(root['@version']) === '1.1.1' ? '1.1.1' : '1.3.0';
  const cap = (root.Capability ?? {}) as Node;
  const getMap = ((cap.Request ?? {}) as Node).GetMap as Node | undefined;
  const http = list(getMap?.DCPType)[0]?.HTTP as Node | undefined;
  const online = (http?.Get as Node | undefined)?.OnlineResource as Node | undefined;
  const href = text(online?.['@href']);
  const url = opts.useFetchedUrl || !href ? endpointOf(from) : href;
  const formats = list(getMap?.Format).map(text);
  const format =
    PREFERRED_FORMATS.find((f) => formats.includes(f)) ?? formats.find((f) => /^image\/png/i.test(f)) ?? 'image/png';
  const out: ImportedSources = { sources: {}, notes: [] };
  const walk = (layer: Node, inherited: string[]) => {
    const crs = [
      ...inherited,
      ...list(layer[version === '1.3.0' ? 'CRS' : 'SRS']).flatMap((c) => text(c).split(/\s+/)),
    ].filter(Boolean);
    const name = text(layer.Name);
    if (name) {
      if (!crs.some((c) => c === 'EPSG:3857' || c === 'EPSG:900913')) {
        out.notes.push(
          `layer ${JSON.stringify(name)}: not offered in EPSG:3857 (${[...new Set(crs)].slice(0, 8).join(' ') || 'no CRS'}): give it a grid in one of its CRSs by hand`,
        );
      } else {
        const source: SourceInput = {
          type: 'wms',
          url,
          version,
          layers: [name],
          format,
          transparent: format === 'image/png',
          ...(crs.includes('EPSG:3857') ? {} : { crs: 'EPSG:900913' as const }),
        };
        addChecked(out, name, source);
      }
    }
    for (const child of list(layer.Layer)) walk(child, crs);
  };
  for (const top of list(cap.Layer)) walk(top, []);
  return out;
}

interface Matrix {
  id: string;
  res: number;
  corner: [number, number];
  tile: [number, number];
  size: [number, number];
}

/** A TileMatrixSet as read: its CRS (null when not an EPSG code) and its matrices, level 0 first. */
interface MatrixSet {
  crs: string | null;
  matrices: Matrix[];
}

/** What every layer of a WMTS document is read with: its matrix sets, its KVP endpoint and where it came from. */
interface WmtsDocument {
  sets: Map<string, MatrixSet>;
  /** GetTile's KVP endpoint (the fetched URL with useFetchedUrl), or null when there is none. */
  kvp: string | null;
  from: string;
}

function fromWmts(root: Node, from: string, opts: CapabilitiesOptions): ImportedSources {
  const contents = (root.Contents ?? {}) as Node;
  const out: ImportedSources = { sources: {}, notes: [] };
  // The KVP endpoint, for layers without a RESTful template.
  const getTile = list(((root.OperationsMetadata ?? {}) as Node).Operation).find((o) => text(o['@name']) === 'GetTile');
  const reported = text(list(((list(getTile?.DCP)[0]?.HTTP ?? {}) as Node).Get)[0]?.['@href']) || null;
  const kvp = opts.useFetchedUrl && /^https?:/i.test(from) ? endpointOf(from) : reported;
  const doc: WmtsDocument = { sets: matrixSetsOf(contents), kvp, from };
  for (const layer of list(contents.Layer)) addLayer(out, layer, doc);
  return out;
}

/** The document's TileMatrixSets by identifier, each matrix's corner easting first and its resolution in CRS units. */
function matrixSetsOf(contents: Node): Map<string, MatrixSet> {
  const sets = new Map<string, MatrixSet>();
  for (const set of list(contents.TileMatrixSet)) {
    const supported = text(set.SupportedCRS);
    // OGC's CRS84 is WGS 84 with longitude first: EPSG:4326's grid, its corners read the other way round.
    const crs84 = /(^|[:/])CRS:?84$/i.test(supported.trim());
    const crs = crs84 ? GEOGRAPHIC_GRID_CRS : normaliseCrs(supported);
    const ne = !crs84 && crs !== null && northingFirst(crs);
    // A scale denominator counts metres on the ground; a matrix in degrees counts the equator's metres per degree.
    const perUnit = crs !== null && KNOWN_CRS[epsgCode(crs) ?? 0]?.geographic ? METRES_PER_DEGREE : 1;
    const matrices = list(set.TileMatrix).map((m): Matrix => {
      const [a, b] = text(m.TopLeftCorner).split(/\s+/).map(Number) as [number, number];
      return {
        id: text(m.Identifier),
        // 12 significant digits: the scale's own rounding (4000 m is written 14285714.285714284) goes away.
        res: Number(((Number(text(m.ScaleDenominator)) * METRES_PER_SCALE) / perUnit).toPrecision(12)),
        // TopLeftCorner is in the CRS's axis order; a grid's origin is easting then northing.
        corner: ne ? [b, a] : [a, b],
        tile: [Number(text(m.TileWidth)), Number(text(m.TileHeight))] as [number, number],
        size: [Number(text(m.MatrixWidth)), Number(text(m.MatrixHeight))] as [number, number],
      };
    });
    sets.set(text(set.Identifier), { crs, matrices });
  }
  return sets;
}

/** A source for each matrix set a layer links to (named `<layer>-<set>` when it links to several), or a note. */
function addLayer(out: ImportedSources, layer: Node, doc: WmtsDocument): void {
  const { sets, kvp, from } = doc;
  const id = text(layer.Identifier);
  const formats = list(layer.Format).map(text);
  const styles = list(layer.Style);
  const style = text((styles.find((s) => text(s['@isDefault']) === 'true') ?? styles[0])?.Identifier) || 'default';
  const templates = list(layer.ResourceURL).filter((r) => text(r['@resourceType']) === 'tile');
  const links = list(layer.TileMatrixSetLink);
  for (const link of links) {
    const setId = text(link.TileMatrixSet);
    const set = sets.get(setId);
    const what = `layer ${JSON.stringify(id)}, matrix set ${JSON.stringify(setId)}`;
    if (!set) {
      out.notes.push(`${what}: the set is not in the document`);
      continue;
    }
    const grid = gridOf(set, what, out.notes);
    if (grid === undefined) continue;
    const { matrices } = set;
    const template =
      PREFERRED_FORMATS.map((f) => templates.find((t) => text(t['@format']) === f)).find(Boolean) ?? templates[0];
    const format = template
      ? text(template['@format'])
      : (PREFERRED_FORMATS.find((f) => formats.includes(f)) ?? formats[0] ?? 'image/png');
    // Levels as the layer limits them (TileMatrixSetLimits), else every matrix of the set.
    const limited = list((link.TileMatrixSetLimits as Node | undefined)?.TileMatrixLimits).map((l) =>
      matrices.findIndex((m) => m.id === text(l.TileMatrix)),
    );
    const levels = limited.filter((i) => i >= 0);
    const ids = matrices.map((m) => m.id);
    const plain = ids.every((m, i) => m === String(i));
    const common = {
      format,
      tileSize: matrices[0]!.tile[0],
      minZoom: levels.length ? Math.min(...levels) : 0,
      maxZoom: levels.length ? Math.max(...levels) : matrices.length - 1,
      tileMatrixSet: setId,
      style,
      ...(plain ? {} : { tileMatrices: ids }),
      ...(grid ? { grid } : {}),
    };
    const name = links.length > 1 ? `${id}-${setId}` : id;
    if (template) addChecked(out, name, { type: 'wmts-rest', url: text(template['@template']), ...common });
    else if (kvp) addChecked(out, name, { type: 'wmts-kvp', url: kvp, layer: id, ...common });
    else
      out.notes.push(
        `${what}: no ResourceURL template and no GetTile KVP endpoint (the document was read from ${from})`,
      );
  }
}

/**
 * The source grid of a matrix set: null for Web Mercator's own (no grid needed), undefined (and a note) for a
 * set tilebreaker cannot address.
 */
function gridOf(set: MatrixSet, what: string, notes: string[]): SourceInput['grid'] | null | undefined {
  const { crs, matrices } = set;
  const m0 = matrices[0];
  if (!m0 || crs === null) {
    notes.push(`${what}: ${!m0 ? 'no TileMatrix' : 'a SupportedCRS that is not an EPSG code'}`);
    return undefined;
  }
  if (matrices.some((m) => m.tile[0] !== m0.tile[0] || m.tile[1] !== m.tile[0])) {
    notes.push(`${what}: tiles not square, or of several sizes`);
    return undefined;
  }
  // The same corner to a thousandth of each matrix's own pixel (corners in degrees are small numbers).
  const sameCorner = matrices.every(
    (m) => Math.abs(m.corner[0] - m0.corner[0]) < m.res * 1e-3 && Math.abs(m.corner[1] - m0.corner[1]) < m.res * 1e-3,
  );
  if (crs === 'EPSG:3857' || crs === 'EPSG:900913') {
    const mercator = Math.abs(m0.corner[0] + ORIGIN_SHIFT_M) < 1 && Math.abs(m0.corner[1] - ORIGIN_SHIFT_M) < 1;
    const halving = matrices.every((m, i) => Math.abs(m.res * m0.tile[0] - tileSpan(i)) / tileSpan(i) < 1e-6);
    if (mercator && halving && sameCorner) return null;
    notes.push(
      `${what}: an EPSG:3857 set that is not the Web Mercator quad tree (its level 0, its corners or its scales differ)`,
    );
    return undefined;
  }
  if (GEOGRAPHIC_CRS.has(crs) && crs !== GEOGRAPHIC_GRID_CRS) {
    notes.push(`${what}: a geographic CRS (${crs}); of those, a source grid takes ${GEOGRAPHIC_GRID_CRS} only`);
    return undefined;
  }
  if (
    crs === GEOGRAPHIC_GRID_CRS &&
    matrices.some((m) => Math.abs(m.corner[0]) > 180 + 1e-6 || Math.abs(m.corner[1]) > 90 + 1e-6)
  ) {
    notes.push(
      `${what}: a TopLeftCorner beyond 180 degrees of longitude or 90 of latitude (written in the other axis order?)`,
    );
    return undefined;
  }
  if (sameCorner) {
    // The deepest matrix says how far the grid reaches.
    const last = matrices.at(-1)!;
    const span = last.res * last.tile[0];
    return {
      crs,
      origin: m0.corner,
      resolutions: matrices.map((m) => m.res),
      extent: [m0.corner[0], m0.corner[1] - last.size[1] * span, m0.corner[0] + last.size[0] * span, m0.corner[1]],
    };
  }
  // Matrices with corners of their own (each snapped to its own tiles around the data, or counted from a
  // bottom-left origin) keep them, level by level; the grid's extent is where every matrix has tiles, so no
  // level is asked for a column or row beyond its MatrixWidth or MatrixHeight.
  const areas = matrices.map((m) => {
    const span = m.res * m.tile[0];
    return [m.corner[0], m.corner[1] - m.size[1] * span, m.corner[0] + m.size[0] * span, m.corner[1]] as const;
  });
  const extent: [number, number, number, number] = [
    Math.max(...areas.map((a) => a[0])),
    Math.max(...areas.map((a) => a[1])),
    Math.min(...areas.map((a) => a[2])),
    Math.min(...areas.map((a) => a[3])),
  ];
  if (!(extent[0] < extent[2] && extent[1] < extent[3])) {
    notes.push(`${what}: its matrices, each at its own corner, have no area in common`);
    return undefined;
  }
  return {
    crs,
    origin: m0.corner,
    origins: matrices.map((m) => m.corner),
    resolutions: matrices.map((m) => m.res),
    extent,
  };
}

function addChecked(out: ImportedSources, id: string, source: SourceInput): void {
  const name = nameFor(id, out.sources);
  try {
    parseSource(source);
    out.sources[name] = source;
  } catch (err) {
    out.notes.push(`${name}: left out: ${(err as Error).message}`);
  }
}
