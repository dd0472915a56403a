import type { OutcomeKind } from '../breaker';

/**
 * The outcome of an HTTP exchange judged by status alone (DESIGN.md, "Outcome classification"). Body checks
 * (ServiceException XML, undecodable or blank images) come on top of this in the tile validation.
 */
export function outcomeOfStatus(status: number): OutcomeKind {
  if (status === 429) return 'rate-limited';
  if (status === 404 || status === 204 || status === 401 || status === 403) return 'neutral';
  if (status >= 200 && status < 300) return 'success';
  if (status === 408 || status >= 500) return 'transient';
  if (status >= 400) return 'permanent';
  // 1xx and unfollowed 3xx: the request did not get a tile, and the server is answering.
  return 'permanent';
}

/** Network-level failures (refused, reset, timeouts, DNS) are transient by definition. */
export function outcomeOfNetworkError(_err: unknown): OutcomeKind {
  return 'transient';
}

/** Retry-After in ms from its header value (delta-seconds or an HTTP date), or undefined. */
export function retryAfterMs(value: string | string[] | undefined, now: number = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
