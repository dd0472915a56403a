import { ALL_OUTCOME_KINDS, type BreakerStateName, type OutcomeKind } from '../../breaker';
import { classifyCall, type CallVerdict, type Settled } from './call-outcome';
import { MAX_WAIT_MS } from '../../messages/breaker-validation';
import { probeBoundMs } from './probe-bound';
import type { RunSlots } from './run-slots';
import type { CallOutcome, GuardDecision } from './types';

/** What `fn` is given: the signal to pass to its request, and whether this call is the fleet's probe. */
export interface RunCall {
  /** Aborted when the caller's signal is, or when the breaker opens while this call is stalled: pass it on. */
  signal: AbortSignal;
  /** This call is the fleet's half-open probe: its outcome decides whether the breaker closes. */
  probe: boolean;
  /** The breaker could not be consulted (Temporal unreachable, the entity wedged): the call goes unprotected. */
  failOpen: boolean;
}

export interface RunOptions<T> {
  /**
   * The outcome of a result or an error, for the breaker (call-outcome.ts has the defaults: HTTP statuses, Node
   * network errors). Return undefined to leave one to the default.
   */
  classify?: (settled: Settled<T>) => OutcomeKind | CallVerdict | undefined;
  /**
   * What a result must satisfy to be returned: a reason when it does not (a geocoder's answer in another CRS, or
   * outside the bounding box asked for). A result that breaks it is never returned: `run` throws a
   * ContractBreachError, and the call counts as a service exception against the key, since the endpoint answered
   * with something unusable.
   */
  contract?: (value: T) => string | null | undefined | false;
  /** The caller's cancellation (an activity's `Context.current().cancellationSignal`): the call is abandoned, nothing reported. */
  signal?: AbortSignal;
  /** At most this many calls to the key at once from this process through `run`, scaled by the ramp after a recovery. Default 10. */
  concurrency?: number;
  /** The `source` label of this call's request metric. Default `run`. */
  name?: string;
}

/** The breaker refused the call: come back after `retryAfterMs` (null: no known end). */
export class BreakerRefusedError extends Error {
  override readonly name = 'BreakerRefusedError';
  constructor(
    readonly key: string,
    readonly state: BreakerStateName,
    readonly retryAfterMs: number | null,
    readonly reason: string,
  ) {
    super(
      `breaker ${key} is ${state}: ${reason}${retryAfterMs !== null ? `; retry after ${Math.ceil(retryAfterMs / 1000)} s` : ''}`,
    );
  }
}

/** The call's result broke the caller's contract: it was refused, and counted against the key. */
export class ContractBreachError extends Error {
  override readonly name = 'ContractBreachError';
  constructor(
    readonly key: string,
    readonly why: string,
  ) {
    super(`${key}: the answer breaks its contract: ${why}`);
  }
}

/** What `run` needs of the guard. */
export interface RunHost {
  acquire(key: string): Promise<GuardDecision>;
  release(decision: GuardDecision, outcome: CallOutcome): void;
  abandon(decision: GuardDecision): void;
  slots: RunSlots;
  request(name: string, key: string, kind: OutcomeKind, seconds: number): void;
  breach(key: string, why: string): void;
}

export const DEFAULT_RUN_CONCURRENCY = 10;

/**
 * One guarded call, and the kind it was reported as: decided by the guard, `fn` run under that decision,
 * its outcome reported and the decision released whatever `fn` does (returns, throws, or is cancelled).
 */
export async function runOnce<T>(
  host: RunHost,
  key: string,
  fn: (call: RunCall) => Promise<T>,
  o: RunOptions<T> = {},
): Promise<{ value: T; kind: OutcomeKind }> {
  const concurrency = o.concurrency ?? DEFAULT_RUN_CONCURRENCY;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1)
    throw new Error(`run: concurrency must be a whole number of at least 1 (got ${String(concurrency)})`);
  o.signal?.throwIfAborted();
  const free = await host.slots.take(key, concurrency, o.signal);
  try {
    const asked = Date.now();
    const decision = await host.acquire(key);
    if (decision.kind === 'refused')
      throw new BreakerRefusedError(key, decision.state, decision.retryAfterMs, decision.reason);
    if (decision.kind === 'proceed') host.slots.allowed(key, decision.allowance);
    // The fleet's only probe ends before its token's lease does: past the lease the entity grants another, and
    // two probes would reach a recovering endpoint. A proceeding call is aborted when the breaker opens while it stalls.
    const bound =
      decision.kind === 'probe'
        ? AbortSignal.timeout(probeBoundMs(decision.token, Date.now() - asked))
        : decision.signal;
    const signals = [o.signal, bound].filter((s): s is AbortSignal => s !== undefined);
    const signal =
      signals.length === 1 ? signals[0]! : AbortSignal.any(signals.length ? signals : [new AbortController().signal]);
    const call: RunCall = {
      signal,
      probe: decision.kind === 'probe',
      failOpen: decision.kind === 'proceed' && decision.failOpen,
    };
    const started = performance.now();
    let settled: Settled<T>;
    try {
      settled = { ok: true, value: await fn(call) };
    } catch (error) {
      settled = { ok: false, error };
    }
    const latencyMs = performance.now() - started;
    if (!settled.ok && signal.aborted && (o.signal?.aborted || decision.kind === 'proceed')) {
      // Cancelled, or shed as the breaker opened on a stalled call: no answer from the endpoint, nothing to report.
      host.abandon(decision);
      throw o.signal?.aborted || decision.kind !== 'proceed' || !decision.signal?.aborted
        ? settled.error
        : decision.signal.reason;
    }
    // A probe past its lease bound is judged as what it is, a call that got no answer in time (transient).
    const verdict = judge(settled, o.classify);
    if (settled.ok && isServed(verdict.kind) && o.contract) {
      const why = safely(() => o.contract!(settled.value));
      if (why) {
        host.release(decision, { kind: 'service-exception', latencyMs });
        host.request(o.name ?? 'run', key, 'service-exception', latencyMs / 1000);
        host.breach(key, why);
        throw new ContractBreachError(key, why);
      }
    }
    host.release(decision, {
      kind: verdict.kind,
      latencyMs,
      ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
    });
    host.request(o.name ?? 'run', key, verdict.kind, latencyMs / 1000);
    if (!settled.ok) throw settled.error;
    return { value: settled.value, kind: verdict.kind };
  } finally {
    free();
  }
}

/** A result the endpoint served (not a failure, a refusal or a rate limit): what a contract is held to. */
function isServed(kind: OutcomeKind): boolean {
  return kind === 'success' || kind === 'neutral';
}

/** The caller's classification where it gives a known kind; the default otherwise (a hook that throws included). */
function judge<T>(settled: Settled<T>, classify: RunOptions<T>['classify']): CallVerdict {
  let own: OutcomeKind | CallVerdict | undefined;
  try {
    own = classify?.(settled);
  } catch {
    own = undefined;
  }
  const verdict = typeof own === 'string' ? { kind: own } : own;
  if (!verdict || !ALL_OUTCOME_KINDS.includes(verdict.kind)) return classifyCall(settled);
  // A pause the entity would refuse (not a finite wait of at most 30 days) would lose the whole report it rides in.
  const wait = verdict.retryAfterMs;
  return wait === undefined || (typeof wait === 'number' && Number.isFinite(wait) && wait >= 0 && wait <= MAX_WAIT_MS)
    ? verdict
    : { kind: verdict.kind };
}

/** A contract that throws (an answer of an unexpected shape) is broken: its error is the reason. */
function safely<R>(f: () => R): R | string {
  try {
    return f();
  } catch (err) {
    return `the check threw: ${err instanceof Error ? err.message : String(err)}`;
  }
}
