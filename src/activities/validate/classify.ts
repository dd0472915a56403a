import { scrubSecrets } from '../../breaker/redact';
import type { OutcomeKind } from '../../breaker';
import type { HttpExchange } from '../http/fetch-url';
import { localCause } from '../http/local-errors';
import { REDIRECT_REFUSED } from '../http/redirects';
import { retryAfterMs } from '../http/retry-after';
import { checkImage, type DecodedPixels } from './image-check';
import { parseServiceException } from './service-exception';
import { isImageKind, sniff } from './sniff';

/** The pipeline's judgement of one response (ARCHITECTURE.md, "Outcome classification"): exactly one kind. */
export interface Verdict {
  kind: OutcomeKind;
  reason: string;
  httpStatus: number | null;
  bytes: number;
  contentType: string | null;
  latencyMs: number;
  retryAfterMs?: number;
  /** 401/403, a refused redirect: the credentials or the configuration are wrong, not the endpoint's health. */
  configError?: boolean;
  exceptionCode?: string;
  /** The ServiceException's code blames the request (shape-memory.ts judges: configuration or systemic). */
  requestFault?: boolean;
  image?: { width: number; height: number; format: string };
  /** With `keepPixels`, a success carries its decoded pixels. */
  pixels?: DecodedPixels;
}

export interface Expectation {
  /** Expected image size; null: any size (the entity's probe). */
  width: number | null;
  height: number | null;
  /** A uniform image is a failure (WMS EXCEPTIONS=BLANK) rather than legitimately empty (open sea). */
  blankIsFailure: boolean;
  keepPixels?: boolean;
  /** Credential values sent with the request: masked in any text of the answer quoted in a reason. */
  secrets?: readonly string[];
}

// Network errors that mean "the body we got is not what the server meant to send" rather than "no answer".
const OVERSIZE = 'UND_ERR_RES_EXCEEDED_MAX_SIZE';

/**
 * Every response or error maps to one outcome:
 *   success            a decoded image of the expected size (and not blank where blank is a failure)
 *   transient          refused, reset, timeouts, 5xx, 408, a body cut off mid-way
 *   service-exception  a 2xx that is not a good tile: ServiceException XML, HTML error page, undecodable,
 *                      truncated, wrong size, or blank where blank is not expected; an oversize body
 *   permanent          400 and other 4xx, and ServiceExceptions whose code blames the request (LayerNotDefined...)
 *   neutral            404 / 204 (no tile there), 401 / 403 and refused or looping redirects (reported as
 *                      configuration errors)
 *   rate-limited       429 (with its Retry-After)
 *   local              the worker's own failure, the endpoint never reached: DNS (ENOTFOUND, EAI_AGAIN), no local
 *                      address or descriptors (EADDRNOTAVAIL, EMFILE, ENFILE, ENOBUFS), the egress proxy refusing
 */
export async function classify(x: HttpExchange, expected: Expectation): Promise<Verdict> {
  const j = judging(x, expected);
  if (x.error) return fromError(j, x.error);
  const status = x.status!;
  return fromStatus(j, status) ?? (await fromBody(j, status, expected));
}

/** What every verdict on one exchange starts from, and the helpers that quote its answer. */
interface Judging {
  x: HttpExchange;
  base: Pick<Verdict, 'httpStatus' | 'bytes' | 'contentType' | 'latencyMs'>;
  retryAfter: number | undefined;
  withRetryAfter: { retryAfterMs?: number };
  /** Text of the answer, credentials masked, cut to `max` characters. */
  quote: (text: string, max: number) => string;
  /** A ServiceException, quoted. */
  describe: (se: { code: string | null; message: string }) => string;
  /** An HTML page's title, quoted. */
  title: (body: Buffer) => string;
}

/** The exchange's fields every verdict carries, its Retry-After, and quoting masked by `expected.secrets`. */
function judging(x: HttpExchange, expected: Expectation): Judging {
  // Masked before any cut or escaping, so no part of a secret survives either.
  const quote = (text: string, max: number) => scrubSecrets(text, expected.secrets ?? []).slice(0, max);
  const describe = (se: { code: string | null; message: string }) =>
    quote(se.code ? `${se.code}: ${se.message}` : se.message, 500);
  const title = (body: Buffer) => {
    const m = /<title[^>]*>([^<]{0,2000})/i.exec(body.toString('utf8', 0, 8192));
    return m ? JSON.stringify(quote(m[1]!.trim(), 120)) : 'no title';
  };
  const base = {
    httpStatus: x.status,
    bytes: x.body.length,
    contentType: x.headers['content-type'] ?? null,
    latencyMs: x.latencyMs,
  };
  const retryAfter = retryAfterMs(x.headers['retry-after']);
  const withRetryAfter = retryAfter !== undefined ? { retryAfterMs: retryAfter } : {};
  return { x, base, retryAfter, withRetryAfter, quote, describe, title };
}

/**
 * An exchange that ended in an error: no answer, a body cut off or too large, a refused redirect, or the
 * worker's own failure.
 */
function fromError(j: Judging, error: NonNullable<HttpExchange['error']>): Verdict {
  const { x, base, quote, withRetryAfter } = j;
  // The reason already names the hop and the rule, with credentials masked.
  if (error.code === REDIRECT_REFUSED) return { ...base, kind: 'neutral', configError: true, reason: error.message };
  if (error.code === OVERSIZE)
    return {
      ...base,
      kind: 'service-exception',
      reason: `body larger than the source's maxBytes (${error.message})`,
    };
  // The worker's own failure (its resolver, sockets, proxy): the endpoint was never reached.
  const local = x.status === null ? localCause(error.code, error.message) : null;
  if (local) return { ...base, kind: 'local', reason: `local: ${local}: ${error.code}: ${quote(error.message, 300)}` };
  const where = x.status === null ? 'no response' : `HTTP ${x.status}, body cut off`;
  return { ...base, kind: 'transient', reason: `${where}: ${error.code}: ${error.message}`, ...withRetryAfter };
}

/**
 * The verdict a status alone decides (rate limited, no tile, credentials, a server failure, a redirect, a
 * rejection, an informational status); null for a 2xx whose body is to be judged.
 */
function fromStatus(j: Judging, status: number): Verdict | null {
  const { x, base, retryAfter, withRetryAfter, describe } = j;
  const exception = () => (sniff(x.body) === 'xml' ? parseServiceException(x.body) : null);
  if (status === 429)
    return {
      ...base,
      kind: 'rate-limited',
      reason: `HTTP 429 rate limited${retryAfter !== undefined ? `, retry after ${retryAfter} ms` : ''}`,
      ...withRetryAfter,
    };
  if (status === 404 || status === 204) return { ...base, kind: 'neutral', reason: `HTTP ${status}: no tile there` };
  if (status === 401 || status === 403)
    return {
      ...base,
      kind: 'neutral',
      configError: true,
      reason: `HTTP ${status}: check the source's credentials (auth) and access`,
    };
  if (status === 408 || status >= 500) {
    const se = exception();
    return {
      ...base,
      kind: 'transient',
      reason: `HTTP ${status}${se ? `: ${describe(se)}` : ''}`,
      ...withRetryAfter,
      ...(se?.code ? { exceptionCode: se.code } : {}),
    };
  }
  if (status >= 300) {
    const se = exception();
    const why =
      status < 400
        ? `redirect not followed${x.headers['location'] === undefined ? ' (no Location)' : ''}`
        : se
          ? describe(se)
          : 'request rejected';
    return {
      ...base,
      kind: 'permanent',
      reason: `HTTP ${status}: ${why}`,
      ...(se?.code ? { exceptionCode: se.code } : {}),
      ...(se?.requestFault ? { requestFault: true } : {}),
    };
  }
  if (status < 200) return { ...base, kind: 'permanent', reason: `HTTP ${status}: unexpected informational status` };
  return null;
}

/** A 2xx: only a good image is a success. */
async function fromBody(j: Judging, status: number, expected: Expectation): Promise<Verdict> {
  const { x, base, describe, title } = j;
  const kind = sniff(x.body);
  if (kind === 'xml') {
    const se = parseServiceException(x.body);
    if (se) {
      const blame = se.requestFault ? { requestFault: true } : {};
      return {
        ...base,
        kind: se.requestFault ? 'permanent' : 'service-exception',
        reason: `ServiceException: ${describe(se)}`,
        ...(se.code ? { exceptionCode: se.code } : {}),
        ...blame,
      };
    }
    return { ...base, kind: 'service-exception', reason: 'XML document instead of an image' };
  }
  if (kind === 'html')
    return { ...base, kind: 'service-exception', reason: `HTML page instead of an image: ${title(x.body)}` };
  if (kind === 'empty') return { ...base, kind: 'service-exception', reason: `HTTP ${status} with an empty body` };
  if (!isImageKind(kind))
    return {
      ...base,
      kind: 'service-exception',
      reason: `not an image (${kind}, Content-Type ${base.contentType ?? 'none'})`,
    };
  return fromImage(base, kind, expected, x.body);
}

/** A 2xx image: decoded and checked (size, truncation, blank where blank is a failure). */
async function fromImage(
  base: Judging['base'],
  kind: Parameters<typeof checkImage>[2],
  expected: Expectation,
  body: Buffer,
): Promise<Verdict> {
  const size =
    expected.width !== null && expected.height !== null ? { width: expected.width, height: expected.height } : null;
  const check = await checkImage(body, size, kind, expected.keepPixels === true);
  if (!check.ok) return { ...base, kind: 'service-exception', reason: check.reason };
  const image = { width: check.width!, height: check.height!, format: check.format! };
  if (check.blank && expected.blankIsFailure)
    return {
      ...base,
      kind: 'service-exception',
      reason: `blank tile (uniform ${check.reason}) where blank is not expected`,
      image,
    };
  return {
    ...base,
    kind: 'success',
    reason: check.blank ? `${check.reason}, uniform` : check.reason,
    image,
    ...(check.pixels ? { pixels: check.pixels } : {}),
  };
}
