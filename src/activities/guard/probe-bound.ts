/** How early a probe stops before its lease ends: the lease is on the entity's clock, not this worker's. */
const PROBE_LEASE_MARGIN_MS = 1_000;

/**
 * How long a probe request may take: its lease, less the time the grant took to arrive (the lease started at
 * most that long ago) and a margin; never less than 250 ms.
 */
export function probeBoundMs(token: { grantedAt: number; leaseUntil: number }, grantTookMs: number): number {
  return Math.max(250, token.leaseUntil - token.grantedAt - Math.max(0, grantTookMs) - PROBE_LEASE_MARGIN_MS);
}
