import { createServer, isIP } from 'node:net';
import type { RuntimeOptions } from '@temporalio/worker';
import { METRIC } from '../messages/metrics';

/** The environment variable that turns a worker's Prometheus endpoint on (as `--metrics-addr` does). */
export const METRICS_ADDR_ENV = 'TILEBREAKER_METRICS_ADDR';

/** Bucket bounds (seconds) of tilebreaker_request_duration_seconds. */
export const REQUEST_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * A Prometheus listen address, `IP:PORT` (IPv6 in brackets: `[::1]:9464`), checked now: the SDK's runtime
 * takes an IP, not a host name, and an address it cannot parse would fail deep in its start. `what` names
 * where the value came from (the flag or the variable) in the error.
 */
export function parseMetricsAddr(value: string, what: string): { host: string; port: number; bindAddress: string } {
  const bad = (why: string) =>
    new Error(`${what} ${JSON.stringify(value)}: ${why}; give IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464`);
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(value.trim());
  if (!m) throw bad('not HOST:PORT');
  const host = m[1] ?? m[2]!;
  const port = Number(m[3]);
  if (m[1] !== undefined ? isIP(host) !== 6 : isIP(host) !== 4)
    throw bad(`${JSON.stringify(host)} is not an IP address (an IPv4 address, or an IPv6 one in brackets)`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad(`port ${m[3]} is not between 1 and 65535`);
  return { host, port, bindAddress: bindAddressOf(host, port) };
}

/**
 * Whether `host:port` can be listened on now: false when something else listens there (EADDRINUSE). Any other
 * failure (a port this user may not bind, an address not on this machine) is left to the runtime to report.
 */
export async function portFree(host: string, port: number): Promise<boolean> {
  return listenOnce(host, port).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'EADDRINUSE',
  );
}

/** A port free on `host` now, as the system picks it. */
export function freePort(host: string): Promise<number> {
  return listenOnce(host, 0);
}

/** Listens on `host:port` (0: any free port) and closes again; resolves with the port it had. */
function listenOnce(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      const bound = (server.address() as { port: number }).port;
      server.close(() => resolve(bound));
    });
  });
}

/** `host:port` as a bind address (IPv6 in brackets). */
export function bindAddressOf(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The URL a scraper reads (the bind address as given: 0.0.0.0 means every interface). */
export function metricsUrl(bindAddress: string): string {
  return `http://${bindAddress}/metrics`;
}

/**
 * The runtime's telemetry with a Prometheus endpoint at `bindAddress`: the SDK's own metrics (`temporal_…`)
 * and tilebreaker's (`tilebreaker_…`, no prefix) on one endpoint. Counters get `_total`, durations are in
 * seconds.
 */
export function prometheusTelemetry(bindAddress: string): NonNullable<RuntimeOptions['telemetryOptions']> {
  return {
    metrics: {
      prometheus: {
        bindAddress,
        countersTotalSuffix: true,
        useSecondsForDurations: true,
        // Tile requests take from milliseconds (a CDN hit) to the source's timeout: finer than the SDK's default buckets.
        histogramBucketOverrides: { [METRIC.requestDuration]: REQUEST_DURATION_BUCKETS },
      },
    },
  };
}
