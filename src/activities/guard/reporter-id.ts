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

/** The environment variable that names this process's quorum witness (several workers on one host told apart). */
export const WITNESS_ENV = 'TILEBREAKER_REPORTER_ID';
/** A witness's length, as the entity bounds a reporter's name. */
const WITNESS_MAX = 256;

/**
 * This process's witness for the breakers' quorum: the host it runs on, the same across restarts, so one failing
 * host (a worker restarted within the window, two processes on it, repeated `tilebreaker tile` runs) is one
 * failing witness, not several; or TILEBREAKER_REPORTER_ID where set, to count several workers on one host apart
 * on purpose. The per-process reporter id (processIdentity) still names the process for rate shares and probes.
 */
export function witnessIdentity(env: NodeJS.ProcessEnv = process.env, host: string = hostname()): string {
  const configured = env[WITNESS_ENV];
  if (configured === undefined || configured === '') return `host:${host}`.slice(0, WITNESS_MAX);
  // eslint-disable-next-line no-control-regex
  if (configured.length > WITNESS_MAX || /[\u0000-\u001f\u007f]/.test(configured)) {
    throw new Error(
      `${WITNESS_ENV} must be at most ${WITNESS_MAX} characters without control characters (got ${configured.length} characters)`,
    );
  }
  return configured;
}
