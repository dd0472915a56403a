import { Agent, type Dispatcher } from 'undici';
import type { ProbeOutcome, ProbeSpec } from '../messages/breaker';
import { probeUrlProblem } from '../messages/breaker-validation';
import { breakerKey } from '../breaker/key';
import { fetchUrl } from './http/fetch-url';
import { DEFAULT_REDIRECT_POLICY } from './http/redirects';
import type { WorkerMetrics } from './metrics/worker-metrics';
import { classify } from './validate/classify';

const MAX_PROBE_MS = 60_000;
/** A probe answer is one tile or a capabilities document: anything larger is cut off (and not a success). */
const MAX_PROBE_BYTES = 16 * 1024 * 1024;
let dispatcher: Dispatcher | undefined;
const probeDispatcher = () => (dispatcher ??= new Agent({ maxResponseSize: MAX_PROBE_BYTES, connect: { timeout: 10_000 } }));

/**
 * The breaker entity's own probe: one request to the spec's URL, judged as the pipeline judges a tile (the
 * same fetch and the same classification), except that a probe of something other than an image (e.g.
 * GetCapabilities, with `contentTypePrefix: 'text/xml'`) succeeds on a 2xx of that type, and `okStatuses`
 * can name the statuses that count as healthy. Never throws for the endpoint's faults (those are the answer).
 */
export async function probeEndpoint(spec: ProbeSpec, metrics?: WorkerMetrics, endpoint?: string): Promise<ProbeOutcome> {
  // The entity refuses such specs; a spec stored before it did is still not fetched (no file://, no user:password@).
  const problem = typeof spec?.url === 'string' ? probeUrlProblem(spec.url) : 'must be a string';
  if (problem !== null) return { outcome: 'permanent', latencyMs: 0, httpStatus: null, reason: `probe not sent: its url ${problem}` };
  const result = await sendProbe(spec);
  // Every request an endpoint receives is counted somewhere: the pipeline's in tilebreaker_requests, these here,
  // under the entity's own key (a partition's, as the pipeline's requests are labelled), else the URL's origin.
  const key = endpoint ?? originKey(spec.url);
  if (metrics && key) metrics.selfProbe(key, result.outcome);
  return result;
}

function originKey(url: string): string | null {
  try {
    return breakerKey(url);
  } catch {
    return null; // a URL that fetch refused too (it was answered as a transient failure): nothing to label
  }
}

async function sendProbe(spec: ProbeSpec): Promise<ProbeOutcome> {
  const x = await fetchUrl(spec.url, {
    dispatcher: probeDispatcher(),
    headers: { 'user-agent': 'tilebreaker-probe', ...spec.headers },
    // Anyone who can signal an entity sets its probe: its wait is bounded whatever the spec says.
    signal: AbortSignal.timeout(Math.min(Math.max(spec.timeoutMs ?? 10_000, 100), MAX_PROBE_MS)),
    // The source's own origin only: a probe carries no source settings, so no allowHosts.
    redirects: DEFAULT_REDIRECT_POLICY,
  });
  const contentType = x.headers['content-type'] ?? '';
  const base = { latencyMs: x.latencyMs, httpStatus: x.status };
  if (!x.error && x.status !== null) {
    if (spec.okStatuses?.includes(x.status)) return { ...base, outcome: 'success', reason: `HTTP ${x.status} is in okStatuses` };
    const nonImage = spec.contentTypePrefix !== undefined && !spec.contentTypePrefix.startsWith('image/');
    if (nonImage && x.status >= 200 && x.status < 300 && contentType.startsWith(spec.contentTypePrefix!)) {
      return { ...base, outcome: 'success', reason: `HTTP ${x.status} ${contentType}, ${x.body.length} bytes` };
    }
  }
  const v = await classify(x, { width: null, height: null, blankIsFailure: false });
  let { kind, reason } = v;
  if (kind === 'success' && spec.contentTypePrefix && !contentType.startsWith(spec.contentTypePrefix)) {
    // A good image of another type than the probe expects is still not what it asked for.
    kind = 'service-exception';
    reason += `; expected ${spec.contentTypePrefix}*`;
  }
  return { ...base, outcome: kind, reason, ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}) };
}
