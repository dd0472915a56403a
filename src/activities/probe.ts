import { Agent, type Dispatcher } from 'undici';
import type { ProbeOutcome, ProbeSpec } from '../messages/breaker';
import { probeUrlProblem } from '../messages/breaker-validation';
import { breakerKey } from '../breaker/key';
import { fetchUrl } from './http/fetch-url';
import { DEFAULT_REDIRECT_POLICY } from './http/redirects';
import type { WorkerMetrics } from './metrics/worker-metrics';
import { classify } from './validate/classify';
import type { WorkerRoots } from './confine/roots';
import { applyAuth, credentialValues } from './http/credentials';
import { sourceBreakerKey } from './fetch/fetch-batch';
import { loadSource } from './sources-file';
import type { AuthConfig, SourceConfig } from '../sources/schema';

const MAX_PROBE_MS = 60_000;
/** A probe answer is one tile or a capabilities document: anything larger is cut off (and not a success). */
const MAX_PROBE_BYTES = 16 * 1024 * 1024;
let dispatcher: Dispatcher | undefined;
const probeDispatcher = () =>
  (dispatcher ??= new Agent({ maxResponseSize: MAX_PROBE_BYTES, connect: { timeout: 10_000 } }));

/**
 * The breaker entity's own probe: one request to the spec's URL, judged as the pipeline judges a tile (the
 * same fetch and the same classification), except that a probe of something other than an image (e.g.
 * GetCapabilities, with `contentTypePrefix: 'text/xml'`) succeeds on a 2xx of that type, and `okStatuses`
 * can name the statuses that count as healthy. Never throws for the endpoint's faults (those are the answer).
 */
export async function probeEndpoint(
  spec: ProbeSpec,
  metrics?: WorkerMetrics,
  endpoint?: string,
  roots?: WorkerRoots,
): Promise<ProbeOutcome> {
  // The entity refuses such specs; a spec stored before it did is still not fetched (no file://, no user:password@).
  const problem = typeof spec?.url === 'string' ? probeUrlProblem(spec.url) : 'must be a string';
  if (problem !== null) return notSent(`its url ${problem}`);
  let sent: Sent = { url: spec.url, headers: {} };
  if (spec.source !== undefined) {
    const resolved = await withSource(spec, endpoint, roots);
    if (typeof resolved === 'string') return notSent(resolved);
    sent = resolved;
  }
  const result = await sendProbe(spec, sent);
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

const notSent = (why: string): ProbeOutcome => ({
  outcome: 'permanent',
  latencyMs: 0,
  httpStatus: null,
  reason: `probe not sent: ${why}`,
});

/** What a probe sends: the URL (with a query credential applied), the source's headers, and what masks them. */
interface Sent {
  url: string;
  headers: Record<string, string>;
  auth?: AuthConfig;
  secrets?: string[];
}

/**
 * The named source's headers and credentials for the probe, read now from its sources file under the worker's
 * sources roots; or why not (a string). Only for the source's own endpoint: the entity's key must be the
 * source's, and the URL on its origin, so a spec cannot pair an operator's credentials with another host.
 */
async function withSource(
  spec: ProbeSpec,
  endpoint: string | undefined,
  roots: WorkerRoots | undefined,
): Promise<Sent | string> {
  const ref = spec.source!;
  if (!roots) return 'a probe that names a source needs the worker to know its sources roots';
  let source: SourceConfig;
  try {
    source = (
      await loadSource(ref.file, ref.name, { roots: roots.sources, subject: 'self-probe', field: 'probe.source.file' })
    ).source;
  } catch (err) {
    return `its source: ${err instanceof Error ? err.message : String(err)}`;
  }
  if (endpoint !== undefined && sourceBreakerKey(source) !== endpoint)
    return `source ${JSON.stringify(ref.name)} is not this breaker's endpoint (${sourceBreakerKey(source)})`;
  if (originKey(spec.url) !== originKey(source.url))
    return `its url is not on source ${JSON.stringify(ref.name)}'s origin`;
  const headers: Record<string, string> = { 'user-agent': source.userAgent, ...source.headers };
  try {
    const url = applyAuth(source.auth, spec.url, headers);
    return { url, headers, ...(source.auth ? { auth: source.auth, secrets: credentialValues(source.auth) } : {}) };
  } catch (err) {
    return (err as Error).message;
  }
}

async function sendProbe(spec: ProbeSpec, sent: Sent): Promise<ProbeOutcome> {
  const x = await fetchUrl(sent.url, {
    dispatcher: probeDispatcher(),
    headers: { 'user-agent': 'tilebreaker-probe', ...spec.headers, ...sent.headers },
    // Anyone who can signal an entity sets its probe: its wait is bounded whatever the spec says.
    signal: AbortSignal.timeout(Math.min(Math.max(spec.timeoutMs ?? 10_000, 100), MAX_PROBE_MS)),
    // The source's own origin only: a probe carries no source settings, so no allowHosts.
    redirects: DEFAULT_REDIRECT_POLICY,
    // A source's credentials are dropped on a hop to another origin, and masked in what is said.
    ...(sent.auth ? { auth: sent.auth } : {}),
  });
  const contentType = x.headers['content-type'] ?? '';
  const base = { latencyMs: x.latencyMs, httpStatus: x.status };
  if (!x.error && x.status !== null) {
    if (spec.okStatuses?.includes(x.status))
      return { ...base, outcome: 'success', reason: `HTTP ${x.status} is in okStatuses` };
    const nonImage = spec.contentTypePrefix !== undefined && !spec.contentTypePrefix.startsWith('image/');
    if (nonImage && x.status >= 200 && x.status < 300 && contentType.startsWith(spec.contentTypePrefix!)) {
      return { ...base, outcome: 'success', reason: `HTTP ${x.status} ${contentType}, ${x.body.length} bytes` };
    }
  }
  const v = await classify(x, {
    width: null,
    height: null,
    blankIsFailure: false,
    ...(sent.secrets ? { secrets: sent.secrets } : {}),
  });
  let { kind, reason } = v;
  if (kind === 'success' && spec.contentTypePrefix && !contentType.startsWith(spec.contentTypePrefix)) {
    // A good image of another type than the probe expects is still not what it asked for.
    kind = 'service-exception';
    reason += `; expected ${spec.contentTypePrefix}*`;
  }
  return { ...base, outcome: kind, reason, ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}) };
}
