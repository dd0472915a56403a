/**
 * The fields every type of tile source shares (zoom range, format, headers, auth, limits, redirects, mirrors),
 * and the names and patterns they are checked with. Pure and Node-free, as schema.ts.
 */
import { z } from 'zod';
import { MAX_ZOOM } from '../geo/mercator';
import { gridSchema } from './grid-schema';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name');

export const authSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('bearer'), tokenEnv: envName }).strict(),
  z.object({ type: z.literal('basic'), userEnv: envName, passwordEnv: envName }).strict(),
  z.object({ type: z.literal('header'), header: z.string().min(1), valueEnv: envName }).strict(),
  z.object({ type: z.literal('query'), param: z.string().min(1), valueEnv: envName }).strict(),
]);
export type AuthConfig = z.output<typeof authSchema>;

/** A tile service URL: http or https, with no credentials in it. */
export const httpUrl = z
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

/** The fields of every source type, spread into each type's object schema. */
export const commonFields = {
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
