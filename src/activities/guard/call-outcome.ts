import type { OutcomeKind } from '../../breaker';
import { localCause } from '../http/local-errors';
import { retryAfterMs } from '../http/retry-after';

/** How a guarded call ended: the value it returned, or what it threw. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** An outcome as `run` reports it: its kind, and the pause a 429 asked for. */
export interface CallVerdict {
  kind: OutcomeKind;
  retryAfterMs?: number;
}

/** Node and undici errors of a call that got no answer from the endpoint: the endpoint's failure. */
const NO_ANSWER = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ESOCKETTIMEDOUT',
]);

/**
 * The default classification of a call that is not a tile (`run`'s `classify` may override it, wholly or for
 * some results by returning undefined):
 *   a value with an HTTP status (a fetch Response, undici's `statusCode`) by its status, as a tile's answer is:
 *     2xx and 3xx success; 404 and 401/403 neutral (no such thing, or our credentials); 408 and 5xx transient;
 *     429 rate-limited (with its Retry-After); other 4xx permanent;
 *   any other value: success;
 *   an error carrying an HTTP status (`status`, `statusCode`, `response.status`, as HTTP clients throw them): by it;
 *   the worker's own failure (DNS, no sockets, the egress proxy): local, never reported to the breaker;
 *   no answer (refused, reset, timed out, undici's UND_ERR_*) and a TimeoutError: transient;
 *   a SyntaxError (an answer that does not parse, such as an HTML error page for JSON): service-exception;
 *   a TypeError, RangeError or ReferenceError with no network cause: neutral (a bug in the caller's code says
 *   nothing of the endpoint);
 *   any other error: transient, as per-process breakers count every error by default.
 */
export function classifyCall(settled: Settled<unknown>): CallVerdict {
  if (settled.ok) {
    const status = statusOf(settled.value);
    return status === undefined ? { kind: 'success' } : byStatus(status, headerOf(settled.value, 'retry-after'));
  }
  const err = settled.error;
  const status = statusOf(err) ?? statusOf(field(err, 'response'));
  if (status !== undefined) return byStatus(status, headerOf(field(err, 'response'), 'retry-after'));
  const code = codeOf(err) ?? codeOf(field(err, 'cause'));
  const message = err instanceof Error ? err.message : '';
  if (code !== undefined) {
    if (localCause(code, message)) return { kind: 'local' };
    if (NO_ANSWER.has(code) || code.startsWith('UND_ERR_')) return { kind: 'transient' };
  }
  if (err instanceof Error && err.name === 'TimeoutError') return { kind: 'transient' };
  if (err instanceof SyntaxError) return { kind: 'service-exception' };
  if ((err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError) && code === undefined)
    return { kind: 'neutral' };
  return { kind: 'transient' };
}

/** An HTTP status's outcome, as a tile answer's is judged (src/activities/validate/classify.ts). */
export function byStatus(status: number, retryAfter?: string): CallVerdict {
  if (status === 429) {
    const ms = retryAfterMs(retryAfter);
    return ms === undefined ? { kind: 'rate-limited' } : { kind: 'rate-limited', retryAfterMs: ms };
  }
  if (status >= 200 && status < 400) return { kind: 'success' };
  if (status === 404 || status === 401 || status === 403) return { kind: 'neutral' };
  if (status === 408 || status >= 500) return { kind: 'transient' };
  return { kind: 'permanent' };
}

function field(v: unknown, name: string): unknown {
  return typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[name] : undefined;
}

function statusOf(v: unknown): number | undefined {
  const s = field(v, 'status') ?? field(v, 'statusCode');
  return typeof s === 'number' && Number.isInteger(s) && s >= 100 && s <= 599 ? s : undefined;
}

function codeOf(v: unknown): string | undefined {
  const c = field(v, 'code');
  return typeof c === 'string' ? c : undefined;
}

/** A header of a fetch Response (Headers) or of a plain headers object. */
function headerOf(v: unknown, name: string): string | undefined {
  const h = field(v, 'headers');
  if (h && typeof (h as { get?: unknown }).get === 'function')
    return (h as { get(n: string): string | null }).get(name) ?? undefined;
  const value = field(h, name);
  return typeof value === 'string'
    ? value
    : Array.isArray(value) && typeof value[0] === 'string'
      ? value[0]
      : undefined;
}
