/**
 * Failures that are the worker's own, not the endpoint's: its resolver, its sockets and file descriptors, its
 * egress proxy. A call that ends in one never reached the endpoint, so the breaker must not count it (one
 * worker with a broken resolver would otherwise open the fleet's breaker); the worker's own quarantine does.
 *
 * undici's request() rejects with the socket's error itself (`code` ENOTFOUND, syscall getaddrinfo); fetch()
 * and some wrappers put it in `cause`: fetchUrl reads both. An HTTP CONNECT refused by a ProxyAgent's proxy is a
 * RequestAbortedError (UND_ERR_ABORTED) whose message names the proxy's status.
 */
const LOCAL_CODES: Readonly<Record<string, string>> = {
  ENOTFOUND: 'DNS resolution failed',
  EAI_AGAIN: 'DNS resolution failed (temporary)',
  EAI_FAIL: 'DNS resolution failed',
  EADDRNOTAVAIL: 'no local address available',
  EMFILE: 'this process is out of file descriptors',
  ENFILE: 'the system is out of file descriptors',
  ENOBUFS: 'no socket buffer space',
};

const PROXY_REFUSED = /^Proxy response \((\d{3})\) !== 200/;

/** Why an error of `code` with `message` is the worker's own (a short phrase), or null when it may be the endpoint's. */
export function localCause(code: string, message: string): string | null {
  const known = LOCAL_CODES[code];
  if (known) return known;
  const proxy = PROXY_REFUSED.exec(message);
  if (proxy) return `the egress proxy refused the tunnel (HTTP ${proxy[1]})`;
  return null;
}
