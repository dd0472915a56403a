import type { Client } from '@temporalio/client';
import type { BreakerStateName, OutcomeKind, PolicyConfigInput, ProbeToken } from '../../breaker';
import type { EntityOptions, ProbeSpec } from '../../messages/breaker';
import type { StallOptions } from './in-flight';
import { NO_METRICS, type WorkerMetrics } from '../metrics/worker-metrics';

export interface GuardOptions {
  client: Client;
  /** Task queue of the workers that run breaker entity workflows (and their probe activity). */
  taskQueue: string;
  /** Who reports: one id per worker process. */
  reporter: string;
  /** Policy configuration for entities this guard creates (an existing entity keeps its own). */
  config?: PolicyConfigInput;
  /** The entity's self-probe for a key, used when this guard creates it. */
  probe?: ProbeSpec | ((key: string) => ProbeSpec | undefined);
  entityOptions?: EntityOptions;
  /**
   * Outcomes are reported once per interval per key (failures at once). Default 1 000 ms. In a large fleet each
   * worker reports less often, so the fleet sends a key's entity about targetSignalsPerSecond reports a second.
   */
  reportIntervalMs?: number;
  /**
   * The reports a second one key's entity should get from the whole fleet: each worker reports every
   * max(reportIntervalMs, reporters / this) (report-spacing.ts; reporters as the entity publishes them, rounded
   * up to a power of two). Default 8; 0: every worker reports every reportIntervalMs.
   */
  targetSignalsPerSecond?: number;
  /** The longest a worker's reports are spaced, whatever the fleet's size. Default 60,000 ms. */
  maxReportIntervalMs?: number;
  /**
   * This process's reads of entity views (DescribeWorkflowExecution) a second, across all its keys: a key's
   * view is kept max(cacheTtlMs, keys in use / this) (read-budget.ts). Reads after this process's own failures
   * are not held back. Default 1, or 1,000 / cacheTtlMs when cacheTtlMs is given (a process with one key then
   * reads it every cacheTtlMs, as asked); 0: each key is read every cacheTtlMs.
   */
  maxReadsPerSecond?: number;
  /**
   * A cached view is used for at least this long (longer when maxReadsPerSecond is shared among several keys).
   * Default 500 ms; with the default read budget a process using one key reads it once a second, so an
   * operator's force-open reaches every process's decisions within about a second (bench:force-open).
   */
  cacheTtlMs?: number;
  /**
   * When this process's recent outcomes turn bad (a quarter or more failing), failures are reported after
   * this short gathering delay instead of at the interval, and the next call waits for the report to land
   * and re-reads the state first. Default 50 ms.
   */
  failureFlushMs?: number;
  /** A query or signal that takes longer counts as unreachable: fail open. Default 2 000 ms. */
  rpcTimeoutMs?: number;
  /**
   * A 429's Retry-After pauses the endpoint for the whole fleet (the breaker stays closed): a call waits out a
   * pause up to this long, and is refused (with the pause's end as retryAfterMs) when more is left. Default
   * 30 000 ms, the fetch's own longest Retry-After (retry.maxRetryAfterMs).
   */
  maxPaceWaitMs?: number;
  /** First delay between reads of a pending probe decision (it doubles up to 100 ms). Default 5 ms. */
  probePollMs?: number;
  /**
   * Half-open: each process waits its own share (`probeJitter`) of this spread, from when the cooldown ended,
   * before it asks for the probe token, then reads the state again; the fleet's requests arrive spread out, and
   * most processes find the token already out and never ask. Default 1,000 ms; 0: ask at once.
   */
  probeSpreadMs?: number;
  /** This process's share of probeSpreadMs, in [0, 1). Default: drawn at random once per guard. */
  probeJitter?: number;
  /**
   * Calls still in flight past a stall threshold count as transient failures while they wait (in-flight.ts);
   * false: only finished calls count. Default: 4 x the p95 of recent successes, at least 1 s (5 s before 8 successes).
   */
  stall?: StallOptions | false;
  logger?: { warn(message: string, meta?: Record<string, unknown>): void };
  /** Where refusals, fail-opens and the state gauge go (default: nowhere). */
  metrics?: WorkerMetrics;
}

export type GuardDecision =
  /** Call the endpoint. `allowance` is the share of normal concurrency allowed (the ramp after a recovery). */
  | {
      kind: 'proceed';
      key: string;
      state: BreakerStateName;
      allowance: number;
      failOpen: boolean;
      /**
       * Aborted (with a BreakerOpenedError) when the breaker opens while this call is stalled: pass it to the
       * request, and treat the abort as a refusal (release nothing: call `abandon`).
       */
      signal?: AbortSignal;
    }
  /** Call the endpoint once as the fleet's probe, and release with its outcome. */
  | { kind: 'probe'; key: string; token: ProbeToken }
  /** Do not call; come back after retryAfterMs (null: no known end) and apply the pipeline's fallback. */
  | { kind: 'refused'; key: string; state: BreakerStateName; retryAfterMs: number | null; reason: string };

export interface CallOutcome {
  kind: OutcomeKind;
  latencyMs?: number;
  retryAfterMs?: number;
}

export interface GuardStats {
  /** Calls that proceeded because the entity could not be reached. */
  failOpen: number;
  refused: number;
  probesGranted: number;
  /** Reads of the entity's state (describe, or the view query for entities without the memo). */
  viewReads: number;
  reportsSent: number;
  reportErrors: number;
  /** Transient failures counted for calls still in flight past the stall threshold. */
  stalled: number;
  /** Stalled calls aborted because the breaker opened while they waited. */
  shed: number;
  /** Calls that waited out a pause a 429 asked for (this process's own, or the fleet's from the entity). */
  paced: number;
}

/** The options with every default filled in, as the guard's parts read them. */
export type ResolvedGuardOptions = Required<Omit<GuardOptions, 'config' | 'probe' | 'entityOptions' | 'stall'>> & Pick<GuardOptions, 'config' | 'probe' | 'entityOptions' | 'stall'>;

export function resolveGuardOptions(options: GuardOptions): ResolvedGuardOptions {
  return {
    reportIntervalMs: 1_000,
    targetSignalsPerSecond: 8,
    maxReportIntervalMs: 60_000,
    maxReadsPerSecond: options.cacheTtlMs !== undefined && options.cacheTtlMs > 0 ? 1_000 / options.cacheTtlMs : 1,
    cacheTtlMs: 500,
    failureFlushMs: 50,
    rpcTimeoutMs: 2_000,
    probePollMs: 5,
    probeSpreadMs: 1_000,
    probeJitter: Math.random(),
    maxPaceWaitMs: 30_000,
    metrics: NO_METRICS,
    logger: { warn: (message, meta) => console.warn(`tilebreaker guard: ${message}`, meta ?? '') },
    ...options,
  };
}
