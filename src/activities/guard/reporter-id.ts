import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * An id for this process among the fleet's reporters. Not the pid alone: every container replica is pid 1, and
 * two replicas with one id would count as one rate sharer and could be handed the same probe token. The host
 * name tells replicas apart where it differs; the random suffix where it does not (host networking, restarts).
 */
export function processIdentity(role: string): string {
  return `${role}-${process.pid}@${hostname()}-${randomBytes(4).toString('hex')}`;
}
