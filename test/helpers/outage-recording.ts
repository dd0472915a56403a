import type { AttemptRecord, ServerStats } from '../../bench/outage/types';

/** bench:outage's recordings, crafted for its unit tests. An arbitrary instant (2001) for the outage's start. */
export const O = 978_307_200_000;

/** A failed (503) attempt from `from` to `to` ms after the outage's start, decided at `decidedAt` as `state`. */
export function failedAttempt(
  worker: number,
  from: number,
  to: number,
  probe: boolean,
  decision: { decidedAt: number; state: string; failOpen?: boolean },
): AttemptRecord {
  return {
    worker,
    start: O + from,
    end: O + to,
    status: 503,
    error: null,
    outcome: 'transient',
    probe,
    decision: { at: O + decision.decidedAt, state: decision.state, failOpen: decision.failOpen ?? false },
  };
}

/** A server that recorded no request: healthy 5 s before the outage, down 40 s, then 15 s recovered. */
export function quietServer(): ServerStats {
  return {
    port: 1,
    schedule: { startAt: O - 5_000, outageAt: O, recoverAt: O + 40_000, endAt: O + 55_000 },
    byPhase: { before: 0, healthy: 0, outage: 0, recovered: 0, after: 0 },
    byMode: {},
    byWorker: {},
    peakInFlight: { before: 0, healthy: 0, outage: 0, recovered: 0, after: 0, overall: 0 },
    requests: [],
    listenerClosedAt: null,
    listenerReopenedAt: null,
  };
}
