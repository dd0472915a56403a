import type { Client } from '@temporalio/client';
import type { BreakerStateName, OutcomeKind, PolicyConfigInput, ProbeToken } from '../../breaker';
import type { EntityOptions, ProbeSpec } from '../../messages/breaker';
import type { StallOptions } from './in-flight';
import type { FailOpenReason } from '../../messages/metrics';
import { NO_METRICS, type WorkerMetrics } from '../metrics/worker-metrics';

export interface GuardOptions {
  client: Client;
  /** Task queue of the workers that run breaker entity workflows (and their probe activity). */
  taskQueue: string;
  /** Who reports: one id per worker process. */
  reporter: string;
  /**
   * Who vouches for this process's outcomes in the quorum (witnessIdentity: its host, unless configured): the
   * quorum counts witnesses, so restarts and processes of one host count once. Unset: the reporter id.
   */
  witness?: string;
  /** Policy configuration for entities this guard creates (an existing entity keeps its own). */
  config?: PolicyConfigInput;
  /**
   * The entity's self-probe for a key: given to an entity this guard creates, and sent once per key with a
   * report, which an entity with no self-probe (and none set by an operator) adopts. Default: the first tile URL
   * this process fetched from the endpoint with success, for sources without credentials or extra headers
   * (learned-probes.ts; `learnProbes: false` turns that off).
   */
  probe?: ProbeSpec | ((key: string) => ProbeSpec | undefined);
  /** Learn each key's self-probe from this process's own successful fetches when `probe` names none (default true). */
  learnProbes?: boolean;
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
  /**
   * In a fleet of more reporters than this (the count the entity publishes), a worker whose outcomes turn bad
   * reports them after failureFlushMs only with probability failureFlushers / reporters, drawn afresh each
   * second; the others keep them for their next report. About this many workers a second send failures at
   * once however large the fleet, so an outage does not flood the entity (report-spacing.ts). Default 64; 0:
   * every worker flushes.
   */
  failureFlushers?: number;
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
   * false: only finished calls count. Default: the p95 of recent successes plus four mean deviations of them
   * (at least 1.5 x that p95 and 1 s; before 8 successes, the fleet's threshold from the view, else 5 s).
   */
  stall?: StallOptions | false;
  /**
   * An entity whose view shows a timer past due (an open breaker past its cooldown, a timed force-open past its
   * end), or whose workflow task has waited or been retried, for longer than this is wedged (its workflow tasks
   * fail, or nobody polls its task queue): the guard fails open for it until it moves again (wedge-watch.ts).
   * Default 10 000 ms (longer than a worker restart's sticky-queue timeout, 5 s); 0: never.
   */
  wedgeGraceMs?: number;
  /** After this many reports in a row to a key are dropped, calls let through to it count as failing open (report-loss.ts). Default 3. */
  blindAfterDrops?: number;
  /**
   * Once a read finds Temporal unreachable, every call fails open at once and each key is read again in the
   * background, at intervals doubling from 1 s up to this. Default 5 000 ms.
   */
  unreachableRecheckMs?: number;
  /**
   * After this many calls in a row to a key failed (none succeeding between), this process holds its next calls
   * to it while the breaker still says closed, reading the state again every quarter of holdMs, for at most
   * holdMs: at an outage's onset the breaker opens within a second or so, and a worker that has just failed
   * twice learns of it before it sends more. A success of any of its calls to the key ends the hold. It costs a
   * worker whose calls fail twice in a row against an endpoint that stays closed (failing less than the trip
   * ratio, or failing for this worker alone) up to holdMs per call until one succeeds. Default 2; 0: never.
   */
  holdAfterFailures?: number;
  /** The longest a call is held after failures in a row. Default 1,000 ms. */
  holdMs?: number;
  /** This process's own quarantine of an endpoint its calls fail far more than the fleet's (quarantine.ts). */
  quarantine?: QuarantineOptions;
  logger?: { warn(message: string, meta?: Record<string, unknown>): void };
  /** Where refusals, fail-opens and the state gauge go (default: nowhere). */
  metrics?: WorkerMetrics;
}

/** This process's own quarantine of an endpoint (quarantine.ts has the rule). */
export interface QuarantineOptions {
  /** Outcomes remembered per endpoint (the newest). Default 20. */
  samples?: number;
  /** No judgement on fewer outcomes than this. Default 8. */
  minSamples?: number;
  /** This many calls in a row failing locally quarantine at once. Default 5. */
  localRun?: number;
  /** This worker's failure ratio (endpoint and local failures) that quarantines it. Default 0.8. */
  ratio?: number;
  /** The fleet's failure ratio must be at most this for endpoint failures to quarantine. Default 0.2. */
  fleetRatioMax?: number;
  /** One call goes through this often while quarantined. Default 2,000 ms. */
  probeIntervalMs?: number;
  /**
   * Endpoint failures (not local ones) quarantine only once the fleet's figures have said it is served, the
   * breaker closed, for this long (ms): at an outage's onset the fleet's window lags this worker's own
   * failures by a few seconds, and the breaker, not a quarantine, is the answer to that. Default 3,000.
   */
  confirmMs?: number;
}

export type GuardDecision =
  /** Call the endpoint. `allowance` is the share of normal concurrency allowed (the ramp after a recovery). */
  | {
      kind: 'proceed';
      key: string;
      state: BreakerStateName;
      allowance: number;
      failOpen: boolean;
      /** Why it fails open: the entity could not be read, is wedged, or does not hear this process's reports. */
      failOpenReason?: FailOpenReason;
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

export type { FailOpenReason };

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
  /** Reports (outcome batches, probe results) and probe cancels that failed and were dropped. */
  reportErrors: number;
  /** Transient failures counted for calls still in flight past the stall threshold. */
  stalled: number;
  /** Stalled calls aborted because the breaker opened while they waited. */
  shed: number;
  /**
   * Calls that waited for a read of the entity that then failed (Temporal unreachable). Only the calls that
   * find the outage fail open after waiting: after them, calls fail open at once (reachability.ts).
   */
  waitedUnreachable: number;
  /** Of failOpen: calls let through because the entity was wedged (wedge-watch.ts). */
  wedgedFailOpen: number;
  /** Of failOpen: calls let through while the entity did not hear this process's reports (report-loss.ts). */
  blindFailOpen: number;
  /** Times an entity was found wedged (each episode once). */
  wedged: number;
  /** Calls that waited out a pause a 429 asked for (this process's own, or the fleet's from the entity). */
  paced: number;
  /** Calls held after this process's calls to the key failed in a row (holdAfterFailures). */
  held?: number;
  /** Answers of `run` and `runChain` calls refused because they broke the caller's contract. */
  contractBreaches?: number;
}

/** The options with every default filled in, as the guard's parts read them. */
export type ResolvedGuardOptions = Required<
  Omit<GuardOptions, 'config' | 'probe' | 'entityOptions' | 'stall' | 'quarantine' | 'learnProbes' | 'witness'>
> &
  Pick<GuardOptions, 'config' | 'probe' | 'entityOptions' | 'stall' | 'quarantine' | 'learnProbes' | 'witness'>;

export function resolveGuardOptions(options: GuardOptions): ResolvedGuardOptions {
  return {
    reportIntervalMs: 1_000,
    targetSignalsPerSecond: 8,
    maxReportIntervalMs: 60_000,
    maxReadsPerSecond: options.cacheTtlMs !== undefined && options.cacheTtlMs > 0 ? 1_000 / options.cacheTtlMs : 1,
    cacheTtlMs: 500,
    failureFlushMs: 50,
    failureFlushers: 64,
    rpcTimeoutMs: 2_000,
    probePollMs: 5,
    probeSpreadMs: 1_000,
    probeJitter: Math.random(),
    maxPaceWaitMs: 30_000,
    wedgeGraceMs: 10_000,
    blindAfterDrops: 3,
    holdAfterFailures: 2,
    holdMs: 1_000,
    unreachableRecheckMs: 5_000,
    metrics: NO_METRICS,
    logger: { warn: (message, meta) => console.warn(`tilebreaker guard: ${message}`, meta ?? '') },
    ...options,
  };
}
