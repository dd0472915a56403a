/**
 * Tile source configuration. Pure and Node-free: the CLI validates a file with it, workflows validate their
 * input with it, activities build requests from it. Credentials are never values here, only the names of
 * environment variables that activities read (so they never reach workflow inputs, histories or manifests).
 */
import { z } from 'zod';
import { ConfigError, parseOrThrow } from '../breaker/config-error';
import { GEOGRAPHIC_CRS, GEOGRAPHIC_GRID_CRS } from '../geo/crs';
import { gridProblems } from '../geo/grid';
import { MAX_ZOOM } from '../geo/mercator';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name');

export const authSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('bearer'), tokenEnv: envName }).strict(),
  z.object({ type: z.literal('basic'), userEnv: envName, passwordEnv: envName }).strict(),
  z.object({ type: z.literal('header'), header: z.string().min(1), valueEnv: envName }).strict(),
  z.object({ type: z.literal('query'), param: z.string().min(1), valueEnv: envName }).strict(),
]);
export type AuthConfig = z.output<typeof authSchema>;

const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http or https URL')
  .refine((u) => !/^https?:\/\/[^/]*@/i.test(u), 'must not embed credentials; use auth with an environment variable');

const headers = z
  .record(z.string(), z.string())
  .refine(
    (h) => !Object.keys(h).some((k) => /^(authorization|proxy-authorization|cookie)$/i.test(k)),
    'must not carry credentials; use auth',
  )
  .default({});

const zoom = z.number().int().min(0).max(MAX_ZOOM);

const finiteNumber = z.number().finite();

/**
 * A tile grid other than Web Mercator's (src/geo/grid.ts): a projected CRS, the top-left origin, a resolution
 * per level and the extent with tiles. The source's zoom levels are the grid's levels.
 */
export const gridSchema = z
  .object({
    crs: z.string().regex(/^EPSG:[1-9]\d{3,5}$/, 'must be an EPSG code such as EPSG:2056'),
    origin: z.tuple([finiteNumber, finiteNumber]),
    origins: z
      .array(z.tuple([finiteNumber, finiteNumber]))
      .max(MAX_ZOOM + 1)
      .optional(),
    resolutions: z
      .array(finiteNumber.positive())
      .min(1)
      .max(MAX_ZOOM + 1),
    extent: z.tuple([finiteNumber, finiteNumber, finiteNumber, finiteNumber]),
    proj4: z.string().min(1).max(1_000).optional(),
    axisOrder: z.enum(['en', 'ne']).optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    for (const p of gridProblems(g)) ctx.addIssue({ code: 'custom', path: p.path, input: g, message: p.message });
    // Web Mercator is the default grid; as a grid it would be a second, incompatible addressing of the same tiles.
    if (g.crs === 'EPSG:3857' || g.crs === 'EPSG:900913')
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: 'is the default grid: leave grid out for Web Mercator',
      });
    // GeoTIFF's ProjectedCSType key is a short: EPSG's codes for projected CRSs stay below 32767.
    if (Number(g.crs.slice(5)) > 32766)
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: 'must be an EPSG code up to 32766 (GeoTIFF keys hold no larger code)',
      });
    if (GEOGRAPHIC_CRS.has(g.crs) && g.crs !== GEOGRAPHIC_GRID_CRS) {
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: `must be a projected CRS in metres, or ${GEOGRAPHIC_GRID_CRS} in degrees; other geographic CRSs are not supported`,
      });
    }
  });

/** The raster formats the pipeline decodes and re-encodes (sharp), and tile viewers read: PNG, JPEG, WebP. */
export const DECODED_FORMAT = /^image\/(png|jpeg|webp)\b/i;

/** A redirects.allowHosts entry: a hostname, or host:port; IPv6 in brackets. */
export const ALLOW_HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/i;

/** A source's name is a folder of the tile store: never `.`, `..`, a path or a hidden name. */
export const SOURCE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const SOURCE_NAME_RULE =
  'must be a source name: a letter or digit, then letters, digits, ".", "_" or "-", at most 64 characters';
export const sourceNameSchema = z.string().regex(SOURCE_NAME, SOURCE_NAME_RULE);

/** At most this many mirrors per source: a refused tile may try each in turn, each a breaker read. */
export const MAX_MIRRORS = 4;

const mirrors = z
  .array(sourceNameSchema)
  .max(MAX_MIRRORS, `must list at most ${MAX_MIRRORS} mirrors`)
  .superRefine((names, ctx) => {
    names.forEach((n, i) => {
      if (names.indexOf(n) < i)
        ctx.addIssue({ code: 'custom', path: [i], input: n, message: `repeats mirrors.${names.indexOf(n)}` });
    });
  });

const common = {
  /** The tile grid, when not Web Mercator's XYZ grid: a WMS is asked for GetMaps in its CRS. */
  grid: gridSchema.optional(),
  /** Breaker partition: a layer or path prefix when one host fronts independent backends. */
  breakerPartition: z.string().min(1).optional(),
  minZoom: zoom.default(0),
  maxZoom: zoom.default(22),
  tileSize: z.number().int().min(16).max(4096).default(256),
  /** MIME type of the tiles, e.g. image/png, image/jpeg, image/webp. */
  format: z
    .string()
    .regex(/^image\/[a-z0-9.+-]+$/i, 'must be an image MIME type such as image/png')
    .default('image/png'),
  headers,
  userAgent: z.string().min(1).default('tilebreaker (+https://github.com/tilebreaker)'),
  auth: authSchema.optional(),
  /** A uniform tile: `allow` it (open sea is blank), or count it as a service failure (EXCEPTIONS=BLANK). */
  blankTiles: z.enum(['allow', 'fail']).default('allow'),
  /**
   * Other sources of the same file that serve the same tiles, tried in order when this source's breaker
   * refuses a tile; each must keep the mirror contract (src/activities/mirror/contract.ts, docs/sources.md).
   */
  mirrors: mirrors.optional(),
  /** Requests in flight to this source per worker. */
  concurrency: z.number().int().min(1).max(256).default(8),
  timeouts: z
    .object({
      // Upper bounds: a request that may wait an hour holds a slot, and its buffer, for that long.
      connectMs: z.number().int().min(1).max(60_000).default(5_000),
      headersMs: z.number().int().min(1).max(600_000).default(15_000),
      /** Longest pause between body chunks. */
      bodyMs: z.number().int().min(1).max(600_000).default(30_000),
      /** Longest whole request, so a body that drips just fast enough cannot hold a slot forever. */
      totalMs: z.number().int().min(1).max(600_000).default(60_000),
    })
    .strict()
    .default({ connectMs: 5_000, headersMs: 15_000, bodyMs: 30_000, totalMs: 60_000 }),
  /** A response body larger than this is aborted (per tile: a WMS metatile response may be this times its tiles). */
  maxBytes: z
    .number()
    .int()
    .min(1_024)
    .max(64 * 1024 * 1024)
    .default(8 * 1024 * 1024),
  /** Redirect hops followed in one chain; more is a configuration error. */
  maxRedirects: z.number().int().min(0).max(10).default(3),
  /**
   * Redirects go to the source's own origin only (and its upgrade to https), never from https to http;
   * other hosts only when listed here.
   */
  redirects: z
    .object({
      /** Other hosts a redirect may go to: a hostname (any port) or host:port, e.g. cdn.example.com:8443. */
      allowHosts: z.array(
        z
          .string()
          .regex(ALLOW_HOST, 'must be a hostname or host:port')
          .refine((h) => {
            const port = ALLOW_HOST.exec(h)?.[2];
            return port === undefined || (Number(port) >= 1 && Number(port) <= 65_535);
          }, 'port must be 1..65535'),
      ),
      /** Send the source's credentials (auth, credential-like headers) to those hosts too. */
      sendCredentials: z.boolean().default(false),
    })
    .strict()
    .optional(),
};

/** `url` holds {z}, {x}, {y} (and optionally {s} with `subdomains`). XYZ rows count from the top. */
const xyz = z
  .object({ type: z.literal('xyz'), url: httpUrl, subdomains: z.array(z.string().min(1)).optional(), ...common })
  .strict();
/** Like xyz, but rows count from the bottom (TMS). */
const tms = z
  .object({ type: z.literal('tms'), url: httpUrl, subdomains: z.array(z.string().min(1)).optional(), ...common })
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
    ...common,
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
    ...common,
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
    ...common,
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
