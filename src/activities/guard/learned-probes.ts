import { maskUrlSecrets } from '../../breaker/redact';
import type { ProbeSource, ProbeSpec } from '../../messages/breaker';
import { probeUrlProblem } from '../../messages/breaker-validation';

/** Keys a process remembers a probe for (a worker serves a handful of endpoints; this only bounds memory). */
const KEYS_KEPT = 1_000;

/**
 * The self-probe each breaker key's entity gets from this worker: the first tile URL the worker fetched from
 * that endpoint with success. It is a URL the worker fetches anyway, and a known good tile, so a probe of it
 * answers "is the endpoint healthy" and nothing else. Only URLs that carry nothing secret are kept: a source with
 * credentials or extra headers is offered by name (its sources file and source), and a URL with a user, a password or a
 * credential-like query parameter (`?apikey=`) is left out here, since the spec is stored in the entity's
 * history and shown by `breaker show`.
 */
export class LearnedProbes {
  private readonly specs = new Map<string, ProbeSpec>();

  /**
   * Offers `url`, fetched with success for `key`, sent with `userAgent`: kept if it is the key's first fit one.
   * From a source with credentials or headers, `source` names it in its sources file: the probe reads them there.
   */
  learn(key: string, url: string, userAgent?: string, source?: ProbeSource): void {
    if (this.specs.has(key) || this.specs.size >= KEYS_KEPT) return;
    if (probeUrlProblem(url) !== null || maskUrlSecrets(url) !== url) return;
    this.specs.set(key, { url, ...(source ? { source } : userAgent ? { headers: { 'user-agent': userAgent } } : {}) });
  }

  spec(key: string): ProbeSpec | undefined {
    return this.specs.get(key);
  }
}
