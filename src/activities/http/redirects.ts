import { ALLOW_HOST, type AuthConfig, type SourceConfig } from '../../sources/schema';
import { maskUrl } from './credentials';

/**
 * Our own redirect policy, in place of undici's redirect interceptor (which sends a custom auth header to
 * any host, follows https to http and goes anywhere): which hops are taken, and what a hop to another
 * origin must not carry. A refused hop is the configuration's problem, not the endpoint's health.
 */
export interface RedirectPolicy {
  /** Most hops in one chain (the source's maxRedirects). */
  maxRedirects: number;
  /** Hosts other than the source's own that a redirect may go to: a hostname (any port) or host:port. */
  allowHosts: readonly string[];
  /** The source's credentials also go to those hosts. */
  sendCredentials: boolean;
}

/** The probe's policy, and the default: the source's own origin only, 3 hops. */
export const DEFAULT_REDIRECT_POLICY: RedirectPolicy = { maxRedirects: 3, allowHosts: [], sendCredentials: false };

/** The error code of an exchange ended by a refused or looping redirect. */
export const REDIRECT_REFUSED = 'REDIRECT_REFUSED';

export function redirectPolicy(source: SourceConfig): RedirectPolicy {
  return {
    maxRedirects: source.maxRedirects,
    allowHosts: source.redirects?.allowHosts ?? [],
    sendCredentials: source.redirects?.sendCredentials ?? false,
  };
}

/** Statuses whose Location is followed (a GET stays a GET, so 303 is no different). */
export function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

export type Hop = { follow: true; url: string; credentials: boolean } | { follow: false; reason: string };

/**
 * The decision on one redirect. `chain` holds the URLs requested so far, the source's own first;
 * `secretParam` is the auth query parameter: masked in reasons, ignored when comparing URLs. `credentials`
 * says whether the target may receive the source's credentials (its own origin, or an allowed host with
 * sendCredentials).
 */
export function nextHop(chain: readonly string[], location: string, policy: RedirectPolicy, secretParam?: string): Hop {
  const source = new URL(chain[0]!);
  const from = new URL(chain[chain.length - 1]!);
  const show = (u: string) => maskUrl(u, secretParam);
  let to: URL;
  try {
    to = new URL(location, from);
  } catch {
    // Not shown: an unparsable Location cannot be masked.
    return { follow: false, reason: `redirect refused: ${show(from.href)} -> a Location that is not a URL` };
  }
  to.hash = '';
  const hop = `${show(from.href)} -> ${show(to.href)}`;
  if (to.protocol !== 'http:' && to.protocol !== 'https:')
    return { follow: false, reason: `redirect refused: ${hop}: only http and https are followed` };
  if (from.protocol === 'https:' && to.protocol === 'http:')
    return { follow: false, reason: `redirect refused: ${hop}: from https to http` };
  const key = (u: string) => sameUrlKey(u, secretParam);
  if (chain.some((u) => key(u) === key(to.href))) {
    return {
      follow: false,
      reason: `redirect loop: ${[...chain, to.href].map(show).join(' -> ')}: ${show(to.href)} visited twice`,
    };
  }
  if (chain.length > policy.maxRedirects) {
    const n = policy.maxRedirects;
    return {
      follow: false,
      reason: `redirect refused: more than ${n} redirect${n === 1 ? '' : 's'} (maxRedirects): ${[...chain, to.href].map(show).join(' -> ')}`,
    };
  }
  // An upgrade from http to https on the same hostname, default ports only, counts as the source's own: it
  // already had the credentials in clear. Another port may be another service.
  const upgrade =
    to.hostname === source.hostname &&
    source.protocol === 'http:' &&
    source.port === '' &&
    to.protocol === 'https:' &&
    to.port === '';
  const own = to.origin === source.origin || upgrade;
  if (own) return { follow: true, url: to.href, credentials: true };
  if (!policy.allowHosts.some((h) => hostMatches(h, to))) {
    return {
      follow: false,
      reason: `redirect refused: ${hop}: to another host ${hostPort(to)} not in redirects.allowHosts`,
    };
  }
  return { follow: true, url: to.href, credentials: policy.sendCredentials };
}

// Header names that look like credentials; authorization, proxy-authorization and cookie among them.
const CREDENTIAL_HEADER = /auth|token|secret|passw|api-?key|session|cookie/i;

/** The request headers for a hop that may not carry credentials: the auth's own header and lookalikes go. */
export function withoutCredentials(
  headers: Record<string, string>,
  auth: AuthConfig | undefined,
): Record<string, string> {
  const custom = auth?.type === 'header' ? auth.header.toLowerCase() : null;
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => name.toLowerCase() !== custom && !CREDENTIAL_HEADER.test(name)),
  );
}

/** `host:port` with the scheme's default port spelled out. */
function hostPort(u: URL): string {
  return `${u.hostname}:${port(u)}`;
}

function port(u: URL): number {
  return Number(u.port || (u.protocol === 'https:' ? 443 : 80));
}

function hostMatches(entry: string, to: URL): boolean {
  const m = ALLOW_HOST.exec(entry);
  if (!m) return false;
  let hostname: string;
  try {
    // The URL parser normalises case, IDN and IPv6 as it does for the target.
    hostname = new URL(`http://${m[1]}`).hostname;
  } catch {
    return false;
  }
  if (hostname !== to.hostname) return false;
  return m[2] === undefined || Number(m[2]) === port(to);
}

function sameUrlKey(url: string, secretParam: string | undefined): string {
  const u = new URL(url);
  u.hash = '';
  if (secretParam !== undefined) u.searchParams.delete(secretParam);
  return u.href;
}
