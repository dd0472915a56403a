/**
 * Tile source configuration. Pure and Node-free: the CLI validates a file with it, workflows validate their
 * input with it, activities build requests from it. Credentials are never values here, only the names of
 * environment variables that activities read (so they never reach workflow inputs, histories or manifests).
 */
import { z } from 'zod';
import { ConfigError, parseOrThrow } from '../breaker/config-error';
import { MAX_ZOOM } from '../geo/mercator';
import { commonFields, DECODED_FORMAT, httpUrl, sourceNameSchema } from './source-fields';

export { gridSchema } from './grid-schema';
export {
  ALLOW_HOST,
  authSchema,
  DECODED_FORMAT,
  MAX_MIRRORS,
  SOURCE_NAME,
  SOURCE_NAME_RULE,
  sourceNameSchema,
  type AuthConfig,
} from './source-fields';

/** `url` holds {z}, {x}, {y} (and optionally {s} with `subdomains`). XYZ rows count from the top. */
const xyz = z
  .object({ type: z.literal('xyz'), url: httpUrl, subdomains: z.array(z.string().min(1)).optional(), ...commonFields })
  .strict();
/** Like xyz, but rows count from the bottom (TMS). */
const tms = z
  .object({ type: z.literal('tms'), url: httpUrl, subdomains: z.array(z.string().min(1)).optional(), ...commonFields })
  .strict();
/**
 * The TileMatrix identifier of each level, level 0 first, when they are not the level's number (MapProxy
 * writes "00", "01", ...; GeoServer "EPSG:3857:0", for which tileMatrixPrefix also serves).
 */
const tileMatrices = z
  .array(z.string().min(1).max(200))
  .min(1)
  .max(MAX_ZOOM + 1)
  .optional();

/** WMTS RESTful: `url` holds {TileMatrix}, {TileRow}, {TileCol} (and optionally {Style}, {TileMatrixSet}). */
const wmtsRest = z
  .object({
    type: z.literal('wmts-rest'),
    url: httpUrl,
    style: z.string().default('default'),
    tileMatrixSet: z.string().min(1).default('GoogleMapsCompatible'),
    tileMatrices,
    ...commonFields,
  })
  .strict();
/** WMTS KVP GetTile on a GoogleMapsCompatible-style matrix set whose matrix ids are the zoom levels. */
const wmtsKvp = z
  .object({
    type: z.literal('wmts-kvp'),
    url: httpUrl,
    layer: z.string().min(1),
    style: z.string().default('default'),
    tileMatrixSet: z.string().min(1),
    /** Prefix of the TileMatrix identifier (e.g. "EPSG:3857:" for GeoServer's gridsets). */
    tileMatrixPrefix: z.string().default(''),
    tileMatrices,
    ...commonFields,
  })
  .strict();
/** WMS GetMap, one request per tile (or per metatile) in EPSG:3857. */
const wms = z
  .object({
    type: z.literal('wms'),
    url: httpUrl,
    version: z.enum(['1.1.1', '1.3.0']).default('1.3.0'),
    layers: z.array(z.string().min(1)).min(1),
    styles: z.array(z.string()).default([]),
    crs: z.enum(['EPSG:3857', 'EPSG:900913']).default('EPSG:3857'),
    transparent: z.boolean().default(true),
    /** Extra GetMap parameters (e.g. MAP, DPI); the standard ones cannot be overridden here. */
    params: z.record(z.string(), z.string()).default({}),
    /**
     * Metatiles: one GetMap for `size` [columns, rows] tiles, cut into tiles; `buffer` pixels rendered around
     * it and cut away, so labels and symbols are not clipped at tile edges. Fewer, larger requests are both
     * faster and kinder to the server (one render, one set of labels).
     */
    metatile: z
      .object({
        size: z.tuple([z.number().int().min(1).max(16), z.number().int().min(1).max(16)]).default([4, 4]),
        buffer: z.number().int().min(0).max(1_024).default(0),
      })
      .strict()
      .optional(),
    /** The server's largest GetMap (its MaxWidth / MaxHeight; MapServer's MAXSIZE defaults to 4096). */
    // At most what the decoder accepts (LIMIT_INPUT_PIXELS is 8192 x 8192).
    maxRequestSize: z.number().int().min(16).max(8_192).default(4_096),
    ...commonFields,
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.metatile) {
      const w = s.metatile.size[0] * s.tileSize + 2 * s.metatile.buffer;
      const h = s.metatile.size[1] * s.tileSize + 2 * s.metatile.buffer;
      if (Math.max(w, h) > s.maxRequestSize) {
        ctx.addIssue({
          code: 'custom',
          path: ['metatile'],
          input: s.metatile,
          message: `makes ${w}x${h} px GetMaps, larger than maxRequestSize ${s.maxRequestSize}`,
        });
      }
      // Cut tiles are re-encoded: only in formats sharp writes and tile viewers read.
      if (!DECODED_FORMAT.test(s.format)) {
        ctx.addIssue({
          code: 'custom',
          path: ['metatile'],
          input: s.format,
          message: `needs format image/png, image/jpeg or image/webp (got ${JSON.stringify(s.format)})`,
        });
      }
    }
    if (s.styles.length > 0 && s.styles.length !== s.layers.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['styles'],
        input: s.styles,
        message: `must be empty or name one style per layer (${s.layers.length})`,
      });
    }
    const reserved = [
      'SERVICE',
      'REQUEST',
      'VERSION',
      'LAYERS',
      'STYLES',
      'SRS',
      'CRS',
      'BBOX',
      'WIDTH',
      'HEIGHT',
      'FORMAT',
      'TRANSPARENT',
    ];
    for (const k of Object.keys(s.params)) {
      if (reserved.includes(k.toUpperCase()))
        ctx.addIssue({
          code: 'custom',
          path: ['params', k],
          input: s.params[k],
          message: 'is set by tilebreaker; use the source fields',
        });
    }
  });

export const sourceSchema = z.discriminatedUnion('type', [xyz, tms, wmtsRest, wmtsKvp, wms]).superRefine((s, ctx) => {
  if (s.minZoom > s.maxZoom)
    ctx.addIssue({ code: 'custom', path: ['minZoom'], input: s.minZoom, message: `must be <= maxZoom (${s.maxZoom})` });
  if (s.grid && s.type === 'tms')
    ctx.addIssue({
      code: 'custom',
      path: ['grid'],
      input: s.type,
      message: 'is for xyz, wmts and wms sources (TMS rows count from the bottom of the Web Mercator grid)',
    });
  // Every placeholder the type needs: a template without {y} would fetch one tile for a whole column.
  const missing = (names: string[]) => names.filter((n) => !s.url.includes(`{${n}}`));
  if (s.type === 'xyz' || s.type === 'tms') {
    const gone = missing(['z', 'x', 'y']);
    if (gone.length)
      ctx.addIssue({
        code: 'custom',
        path: ['url'],
        input: s.url,
        message: `must contain {z}, {x} and {y} (missing ${gone.map((n) => `{${n}}`).join(', ')})`,
      });
  }
  if ((s.type === 'xyz' || s.type === 'tms') && /\{s\}/.test(s.url) && !s.subdomains?.length) {
    ctx.addIssue({
      code: 'custom',
      path: ['subdomains'],
      input: s.subdomains,
      message: 'must list subdomains when url contains {s}',
    });
  }
  if (s.type === 'wmts-rest') {
    const gone = missing(['TileMatrix', 'TileRow', 'TileCol']);
    if (gone.length)
      ctx.addIssue({
        code: 'custom',
        path: ['url'],
        input: s.url,
        message: `must contain {TileMatrix}, {TileRow} and {TileCol} (missing ${gone.map((n) => `{${n}}`).join(', ')})`,
      });
  }
});

export type SourceConfig = z.output<typeof sourceSchema>;
export type SourceInput = z.input<typeof sourceSchema>;

/** A configuration file: named sources. Mirrors name other sources of the file, one level deep. */
export const sourcesFileSchema = z
  .object({ sources: z.record(sourceNameSchema, sourceSchema) })
  .strict()
  .superRefine((f, ctx) => {
    for (const [name, source] of Object.entries(f.sources)) {
      source.mirrors?.forEach((m, i) => {
        const path = ['sources', name, 'mirrors', i];
        // Own names only: "constructor" is a valid source name, and every object inherits one.
        const target = Object.hasOwn(f.sources, m) ? f.sources[m] : undefined;
        if (m === name) ctx.addIssue({ code: 'custom', path, input: m, message: 'is this source itself' });
        else if (!target) ctx.addIssue({ code: 'custom', path, input: m, message: 'is not a source of this file' });
        // A mirror of a mirror would make a refusal walk a graph (and maybe a loop): chains are one level deep.
        else if (target.mirrors?.length)
          ctx.addIssue({
            code: 'custom',
            path,
            input: m,
            message: 'has mirrors of its own: mirror chains are one level deep',
          });
      });
    }
  });
export type SourcesFile = z.output<typeof sourcesFileSchema>;

export function parseSource(input: unknown, subject = 'source'): SourceConfig {
  return parseOrThrow(sourceSchema, input, subject);
}

/**
 * With `untrusted`, the file may be anything a requester pointed the worker at: only what lies under its
 * `sources` field is quoted in errors (a `.env` read as YAML must not come back in the message).
 */
export function parseSourcesFile(input: unknown, subject = 'sources file', untrusted = false): SourcesFile {
  if (untrusted && (input === null || typeof input !== 'object' || Array.isArray(input) || !('sources' in input))) {
    throw new ConfigError(subject, [
      `(root): not a sources file: expected a mapping with a "sources" field (found ${kindOf(input)})`,
    ]);
  }
  return parseOrThrow(
    sourcesFileSchema,
    input,
    subject,
    untrusted ? { mayQuote: (p) => p[0] === 'sources' && p.length > 1 } : {},
  );
}

function kindOf(v: unknown): string {
  if (v === null || v === undefined) return 'an empty document';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object')
    return `a mapping with ${Object.keys(v).length} other field${Object.keys(v).length === 1 ? '' : 's'}`;
  return `a ${typeof v}`;
}
