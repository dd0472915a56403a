import { request } from 'undici';
import type { OutcomeKind } from '../breaker';
import type { ProbeSpec } from '../workflows/breaker-messages';
import { outcomeOfNetworkError, outcomeOfStatus, retryAfterMs } from './http-outcome';

export interface ProbeOutcome {
  outcome: OutcomeKind;
  latencyMs: number;
  httpStatus: number | null;
  retryAfterMs?: number;
  reason: string;
}

/**
 * The breaker entity's own probe: one request to the spec's URL, judged as the pipeline judges a tile.
 * Never throws for the endpoint's faults (those are the answer); only for the activity's own.
 */
export async function probeEndpoint(spec: ProbeSpec): Promise<ProbeOutcome> {
  const timeoutMs = spec.timeoutMs ?? 10_000;
  const started = performance.now();
  try {
    const res = await request(spec.url, {
      method: 'GET',
      headers: { 'user-agent': 'tilebreaker-probe', ...spec.headers },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = await res.body.arrayBuffer();
    const latencyMs = performance.now() - started;
    const contentType = String(res.headers['content-type'] ?? '');
    const healthy = spec.okStatuses ? spec.okStatuses.includes(res.statusCode) : res.statusCode >= 200 && res.statusCode < 300;
    // An unexpected 2xx (not in okStatuses) is the server not doing what the probe needs.
    let outcome: OutcomeKind = healthy ? 'success' : res.statusCode < 300 ? 'service-exception' : outcomeOfStatus(res.statusCode);
    let reason = `HTTP ${res.statusCode} ${contentType || 'no content-type'}, ${body.byteLength} bytes`;
    if (outcome === 'success' && spec.contentTypePrefix && !contentType.startsWith(spec.contentTypePrefix)) {
      // A 200 that is not what we asked for (an error page, a ServiceException) is the server failing.
      outcome = 'service-exception';
      reason += `; expected ${spec.contentTypePrefix}*`;
    }
    const retryAfter = retryAfterMs(res.headers['retry-after']);
    return { outcome, latencyMs, httpStatus: res.statusCode, reason, ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}) };
  } catch (err) {
    return {
      outcome: outcomeOfNetworkError(err),
      latencyMs: performance.now() - started,
      httpStatus: null,
      reason: err instanceof Error ? `${err.name}: ${(err as { code?: string }).code ?? err.message}` : String(err),
    };
  }
}
