import { request, type Dispatcher } from 'undici';
import type { AuthConfig } from '../../sources/schema';
import {
  DEFAULT_REDIRECT_POLICY,
  isRedirect,
  nextHop,
  REDIRECT_REFUSED,
  withoutCredentials,
  type RedirectPolicy,
} from './redirects';

/** What came back from one HTTP exchange, or the error that ended it. */
export interface HttpExchange {
  /** The URL last requested: the last hop of a redirect chain. */
  url: string;
  status: number | null;
  headers: Record<string, string>;
  body: Buffer;
  /** The whole exchange, every redirect hop included. */
  latencyMs: number;
  /** Set when no complete response arrived (refused, reset, timeout, size cap, DNS) or a redirect was refused. */
  error?: { code: string; message: string };
}

export interface FetchOptions {
  dispatcher: Dispatcher;
  /** Request headers, credentials included (a hop to another origin gets them stripped). */
  headers: Record<string, string>;
  signal?: AbortSignal;
  /** Which redirects are followed; default: the same origin only, 3 hops. */
  redirects?: RedirectPolicy;
  /** The source's auth: which header or query parameter a hop to another origin must drop, and reasons mask. */
  auth?: AuthConfig;
}

/**
 * One GET, following redirects as the policy allows; never throws for network faults (they are an outcome),
 * only for programming errors. A refused or looping redirect ends with error code REDIRECT_REFUSED.
 */
export async function fetchUrl(url: string, opts: FetchOptions): Promise<HttpExchange> {
  const started = performance.now();
  const policy = opts.redirects ?? DEFAULT_REDIRECT_POLICY;
  const secretParam = opts.auth?.type === 'query' ? opts.auth.param : undefined;
  const chain = [url];
  let current = url;
  let sendHeaders = { ...opts.headers };
  // Once a hop has dropped the credentials, no later hop gets them back.
  let credentials = true;
  let status: number | null = null;
  let headers: Record<string, string> = {};
  try {
    const secretValue = secretParam !== undefined ? new URL(url).searchParams.get(secretParam) : null;
    for (;;) {
      status = null;
      headers = {};
      const res = await request(current, {
        method: 'GET',
        headers: sendHeaders,
        dispatcher: opts.dispatcher,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      status = res.statusCode;
      headers = flatten(res.headers);
      const location = headers['location'];
      if (!isRedirect(status) || location === undefined) {
        // A body past the source's maxBytes, a reset mid-body or a stalled body rejects here, keeping the status.
        const body = Buffer.from(await res.body.arrayBuffer());
        return { url: current, status, headers, body, latencyMs: performance.now() - started };
      }
      // A redirect's body is never used; read it off (a large one closes the connection instead).
      await res.body.dump(opts.signal ? { limit: 64 * 1024, signal: opts.signal } : { limit: 64 * 1024 });
      const hop = nextHop(chain, location, policy, secretParam);
      if (!hop.follow) {
        return {
          url: current,
          status,
          headers,
          body: Buffer.alloc(0),
          latencyMs: performance.now() - started,
          error: { code: REDIRECT_REFUSED, message: hop.reason },
        };
      }
      const next = new URL(hop.url);
      // A Host header set for one origin is wrong for another.
      if (next.origin !== new URL(current).origin)
        sendHeaders = Object.fromEntries(Object.entries(sendHeaders).filter(([k]) => k.toLowerCase() !== 'host'));
      credentials &&= hop.credentials;
      if (!credentials) sendHeaders = withoutCredentials(sendHeaders, opts.auth);
      if (secretParam !== undefined) {
        // The query credential goes where credentials go (put back if the Location dropped it), and nowhere else.
        const want = credentials ? secretValue : null;
        if (want !== null && next.searchParams.get(secretParam) !== want) next.searchParams.set(secretParam, want);
        if (want === null && next.searchParams.has(secretParam)) next.searchParams.delete(secretParam);
      }
      current = next.href;
      chain.push(current);
    }
  } catch (err) {
    // undici errors carry a string code (ECONNREFUSED, UND_ERR_*), or their cause does (fetch-style wrappers);
    // an abort is a DOMException with a numeric one.
    const e = err as { code?: unknown; name?: string; message?: string; cause?: { code?: unknown } };
    const code =
      typeof e.code === 'string' ? e.code : typeof e.cause?.code === 'string' ? e.cause.code : (e.name ?? 'ERROR');
    return {
      url: current,
      status,
      headers,
      body: Buffer.alloc(0),
      latencyMs: performance.now() - started,
      error: { code, message: e.message ?? String(err) },
    };
  }
}

function flatten(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}
