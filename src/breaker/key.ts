/**
 * The canonical breaker key of a failure domain: `scheme://host:port` with the scheme and host in lower
 * case, IDNs in punycode, IPv6 in brackets and the port always explicit (80 / 443 when the URL has none),
 * optionally followed by `/` and a partition (a WMS layer, or a path prefix where one host fronts
 * independent backends). Two pipelines that call the same endpoint get the same key, whatever else their
 * URLs carry (paths, query strings, credentials), and so share one breaker: `breaker/<key>`.
 *
 *   breakerKey('HTTPS://Tiles.Example.com/osm/{z}/{x}/{y}.png')      -> 'https://tiles.example.com:443'
 *   breakerKey('http://wms.example.com:8080/cgi-bin/mapserv?map=a', { partition: 'roads' })
 *                                                                     -> 'http://wms.example.com:8080/roads'
 */
export function breakerKey(url: string, opts: { partition?: string } = {}): string {
  let parsed: URL;
  try {
    // Tile templates carry {z}/{x}/{y} placeholders, which URL accepts in paths; only the origin matters here.
    parsed = new URL(url);
  } catch {
    throw new Error(`breaker key: url is not an absolute URL (got ${JSON.stringify(url)})`);
  }
  const scheme = parsed.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') {
    throw new Error(`breaker key: url must be http or https (got ${JSON.stringify(url)})`);
  }
  const port = parsed.port || (scheme === 'https' ? '443' : '80');
  const origin = `${scheme}://${parsed.hostname.toLowerCase()}:${port}`;
  const partition = opts.partition?.trim().replace(/^\/+|\/+$/g, '');
  if (opts.partition !== undefined && !partition) {
    throw new Error(`breaker key: partition must not be empty (got ${JSON.stringify(opts.partition)})`);
  }
  return partition ? `${origin}/${partition}` : origin;
}

/**
 * A named key: two to eight parts of lower-case letters, digits, '.', '_' or '-' joined by ':', the first
 * starting with a letter and the last not all digits (so a host:port is never taken for one), e.g.
 * `geocoder:primary`. For calls that have no URL of their own to key on (a geocoder, a feature service behind
 * a client library): the same entity, metrics, CLI and alerts as a URL's key.
 */
const NAMED_KEY = /^[a-z][a-z0-9._-]{0,62}(?::[a-z0-9._-]{1,63}){1,7}$/;

/** `name` as a named breaker key; throws naming the value when it is not one (see NAMED_KEY). */
export function namedBreakerKey(name: string): string {
  if (isNamedKey(name)) return name;
  throw new Error(
    `breaker key: a name is 2 to 8 parts of lower-case letters, digits, '.', '_' or '-' joined by ':', the first starting with a letter and the last not all digits, such as geocoder:primary (got ${JSON.stringify(name)})`,
  );
}

/** Is `key` a named key (not a URL's)? */
export function isNamedKey(key: string): boolean {
  const parts = key.split(':');
  return NAMED_KEY.test(key) && parts[0] !== 'http' && parts[0] !== 'https' && !/^\d+$/.test(parts[parts.length - 1]!);
}

/** The entity workflow's id for a key. */
export function breakerWorkflowId(key: string): string {
  return `breaker/${key}`;
}

/** The key of a breaker entity's workflow id (`breaker/<key>`); undefined for any other id. */
export function entityKeyOf(workflowId: string | undefined): string | undefined {
  return workflowId?.startsWith('breaker/') ? workflowId.slice('breaker/'.length) : undefined;
}

/** Is `key` already canonical, a URL's key or a named one? (Keys from configuration or the CLI are checked before use.) */
export function isCanonicalKey(key: string): boolean {
  if (isNamedKey(key)) return true;
  const m = /^(https?:\/\/[^/]+)(?:\/(.+))?$/.exec(key);
  if (!m) return false;
  try {
    return breakerKey(m[1]!, m[2] !== undefined ? { partition: m[2] } : {}) === key;
  } catch {
    return false;
  }
}
