import { request, type Dispatcher } from 'undici';

/** What came back from one HTTP exchange, or the error that ended it. */
export interface HttpExchange {
  url: string;
  status: number | null;
  headers: Record<string, string>;
  body: Buffer;
  latencyMs: number;
  /** Set when no complete response arrived: refused, reset, timeout, size cap, DNS. */
  error?: { code: string; message: string };
}

export interface FetchOptions {
  dispatcher: Dispatcher;
  headers: Record<string, string>;
  signal?: AbortSignal;
}

/** One GET; never throws for network faults (they are an outcome), only for programming errors. */
export async function fetchUrl(url: string, opts: FetchOptions): Promise<HttpExchange> {
  const started = performance.now();
  let status: number | null = null;
  let headers: Record<string, string> = {};
  try {
    const res = await request(url, { method: 'GET', headers: opts.headers, dispatcher: opts.dispatcher, ...(opts.signal ? { signal: opts.signal } : {}) });
    status = res.statusCode;
    headers = flatten(res.headers);
    // A body past the source's maxBytes, a reset mid-body or a stalled body rejects here, keeping the status.
    const body = Buffer.from(await res.body.arrayBuffer());
    return { url, status, headers, body, latencyMs: performance.now() - started };
  } catch (err) {
    // undici errors carry a string code (ECONNREFUSED, UND_ERR_*); an abort is a DOMException with a numeric one.
    const e = err as { code?: unknown; name?: string; message?: string };
    return {
      url,
      status,
      headers,
      body: Buffer.alloc(0),
      latencyMs: performance.now() - started,
      error: { code: typeof e.code === 'string' ? e.code : (e.name ?? 'ERROR'), message: e.message ?? String(err) },
    };
  }
}

function flatten(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}
