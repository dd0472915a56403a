import type { OutcomeKind } from '../../src/breaker/outcome';

export const MODES = ['shared', 'per-process', 'retry-only'] as const;
export type ModeName = (typeof MODES)[number];

export const OUTAGE_KINDS = ['503', 'refused', 'hang'] as const;
/**
 * `503`: the server answers every request with 503; `refused`: the listening socket is closed (ECONNREFUSED);
 * `hang`: the server accepts every request and never answers, then drops the held connections as it recovers.
 */
export type OutageKind = (typeof OUTAGE_KINDS)[number];

/** The retry policy every mode sits on: bounded attempts, full-jitter exponential backoff. */
export interface RetryOptions {
  /** Attempts per tile, the first included. */
  attempts: number;
  /** Backoff before retry k (k = 0 for the first retry) is uniform in [0, min(capMs, baseMs * 2^k)). */
  baseMs: number;
  capMs: number;
}

/** One outage scenario; every mode runs the same one against its own fresh server schedule. */
export interface Scenario {
  workers: number;
  healthyMs: number;
  outageMs: number;
  recoveryMs: number;
  outageKind: OutageKind;
  /** Retry-After (seconds) on the 503 answers; null: none. */
  retryAfterSec: number | null;
  /** Mean time the server takes to render a healthy tile (uniform in [0.5, 1.5] x this). */
  tileLatencyMs: number;
  retry: RetryOptions;
  /** Attempts a half-open probe gets (1: a probe is one request, never retried). */
  probeAttempts: number;
  /** Shared mode: the entity's ramp after a recovery (ms); null: the project's default. */
  rampMs: number | null;
  /** Breaker policy shared by both breaker modes, as far as each allows. */
  breaker: {
    windowMs: number;
    minSamples: number;
    failureRatio: number;
    cooldownMs: number;
  };
}

/** Absolute times (epoch ms, see clock.ts) of one server schedule, as the server actually switched. */
export interface Schedule {
  startAt: number;
  outageAt: number;
  recoverAt: number;
  endAt: number;
}

export type AttemptError = 'refused' | 'reset' | 'timeout' | 'aborted' | 'error';

/** One HTTP attempt as the simulated worker saw it (client-side: refused connections count too). */
export interface AttemptRecord {
  worker: number;
  start: number;
  end: number;
  /** HTTP status, or 0 when no response arrived. */
  status: number;
  error: AttemptError | null;
  /** The pipeline's classification of the answer. */
  outcome: OutcomeKind;
  /** Sent as a half-open probe (per-process: the breaker was not closed; shared: the guard granted a probe). */
  probe: boolean;
  /** Shared: the guard decision the attempt was made under (when it was taken, the state it named, fail-open). */
  decision?: { at: number; state: string; failOpen: boolean };
}

/**
 * What a worker knew about its breaker, recorded when it changes: `opened`, `half-open`, `closed` from the
 * breaker's own events (per-process), `refused`, `probe`, `proceed` from the guard's decisions (shared).
 */
export type BreakerViewKind = 'opened' | 'half-open' | 'closed' | 'refused' | 'probe' | 'proceed';

export interface BreakerView {
  worker: number;
  at: number;
  kind: BreakerViewKind;
}

/** What the tile server counted for one mode's run. */
export interface ServerStats {
  port: number;
  schedule: Schedule;
  /** Requests received per phase (by arrival time). */
  byPhase: Record<ServerPhase, number>;
  /** Requests received per `x-sim-mode` label (`unlabelled` for requests without one, e.g. entity self-probes). */
  byMode: Record<string, number>;
  /** Requests received per worker (`x-sim-worker`), for the labelled mode. */
  byWorker: Record<string, number>;
  peakInFlight: Record<ServerPhase | 'overall', number>;
  /** Every request: [arrivedAt, finishedAt, worker (-1: unlabelled), phase index in SERVER_PHASES]. */
  requests: Array<[number, number, number, number]>;
  /** How often the server closed / reopened its listening socket (refused outages). */
  listenerClosedAt: number | null;
  listenerReopenedAt: number | null;
}

export const SERVER_PHASES = ['before', 'healthy', 'outage', 'recovered', 'after'] as const;
export type ServerPhase = (typeof SERVER_PHASES)[number];
