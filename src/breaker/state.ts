import type { PolicyConfig, PolicyConfigInput } from './config';
import type { OutcomeCounts, OutcomeKind } from './outcome';
import type { RollingWindow, WindowFigures } from './window';

/** The automatic state machine's phase. */
export type Phase = 'closed' | 'open' | 'half-open';

/**
 * Who decides: `auto` (the phase rules), an operator's `forced-open` or `forced-closed`, or
 * `metrics-only`, where the phase still moves ("what it would do") but nothing is ever blocked.
 */
export type Mode = 'auto' | 'forced-open' | 'forced-closed' | 'metrics-only';

/** The state the fleet sees: the phase in `auto` mode, otherwise the mode. */
export type BreakerStateName = Phase | Exclude<Mode, 'auto'>;

/** A half-open probe token. Its generation fences it: a result for any other generation is ignored. */
export interface ProbeToken {
  generation: number;
  requestId: string;
  holder: string;
  grantedAt: number;
  leaseUntil: number;
}

/**
 * The whole breaker state. Plain JSON (no undefined, no Map): it is carried across continue-as-new. `version`
 * names its shape; migrate.ts brings every older shape to this one.
 */
export interface PolicyState {
  version: 2;
  config: PolicyConfig;
  mode: Mode;
  /** Expiry of a forced-open with a duration; null when forced open until told otherwise. */
  forcedUntil: number | null;
  phase: Phase;
  window: RollingWindow;
  openedAt: number | null;
  cooldownUntil: number | null;
  /** Opens in a row without a long enough closed stretch in between; drives cooldown growth. */
  consecutiveOpens: number;
  closedAt: number | null;
  /** Start of the traffic ramp after a recovery; null when no ramp runs. */
  rampStartedAt: number | null;
  probes: ProbeToken[];
  lastGeneration: number;
  /** Successful probes in this half-open round. */
  probeSuccesses: number;
  /** Failed probes in this half-open round that did not reopen it (probeTrials: k-of-n). */
  probeFailures: number;
  /**
   * Failed trials in a row (each reopened the breaker; a successful probe, a close or a reset ends the run): the
   * wait before the next grows with them (probeBackoff).
   */
  failedTrials: number;
  /** An upstream Retry-After seen with failures: the next cooldown lasts at least until then. */
  retryAfterHintUntil: number | null;
  /** A Retry-After the fleet heeds (a 429's, or a failure's): nothing goes to the endpoint until then (null: none). */
  pacedUntil: number | null;
}

export type TransitionReason =
  | 'failure-ratio'
  | 'latency'
  | 'permanent-surge'
  | 'slow-calls'
  | 'cooldown-elapsed'
  | 'probe-failed'
  | 'probes-succeeded'
  | 'forced-open'
  | 'forced-close'
  | 'force-expired'
  | 'disabled'
  | 'enabled'
  | 'reset'
  | 'configured'
  /** Not a change of state: the entity declined to trip because the failures came from too few reporters. */
  | 'quorum-not-met';

/** One recorded transition: when, from, to, why, and the figures that caused it. */
export interface TransitionRecord {
  at: number;
  from: BreakerStateName;
  to: BreakerStateName;
  reason: TransitionReason;
  detail: string;
  figures?: WindowFigures;
  /** The cooldown chosen, on transitions into open. */
  cooldownMs?: number;
  /** Set in metrics-only mode: the phase moved, but nothing was blocked. */
  shadow?: boolean;
  /** On an operator's action: who the operator said they were (free text, e.g. `--actor`; not verified). */
  actor?: string;
  /** On an operator's action: the process that sent it, as that process's client reported itself. */
  sender?: AdminSender;
}

/**
 * The process that sent an admin signal, filled in by the client code (never from a user's flag): the
 * Temporal client's identity (by default `<pid>@<host>`) and the OS user and host it ran as. It is what the
 * sending process says about itself, so it names the machine and account a change came from; it is not
 * authentication (that is the server's job: mTLS, an authorizer).
 */
export interface AdminSender {
  identity: string;
  user: string;
  host: string;
}

export type PolicyEvent =
  /** Time passed: expire leases, end cooldowns and timed force-opens. */
  | { type: 'tick' }
  /** A batched outcome report from one worker for one interval. */
  | {
      type: 'report';
      counts: Partial<OutcomeCounts>;
      /** Latency histogram over LATENCY_BOUNDS_MS (see latency.ts). */
      latency?: number[];
      /** Largest upstream Retry-After (ms) seen with failures in this batch. */
      retryAfterMs?: number;
      /**
       * The longest Retry-After (ms from the report) a 429 in this batch asked for: the fleet pauses the endpoint
       * that long (capped), without counting a failure.
       */
      rateLimitedForMs?: number;
      /**
       * The fleet's concurrency: calls its workers had in flight to the endpoint lately (the entity sums what
       * each reporter says). Lowers the sample floors to what that traffic can reach (rules.ts floorsFor).
       */
      concurrency?: number;
      /** Who sent it (the guard's reporter id): with a quorum, the ratio rules count failing reporters. */
      reporter?: string;
      /**
       * Who vouches for it in the quorum, when not the reporter: the sending process's host, the same across its
       * restarts, so one host's processes count as one failing reporter.
       */
      witness?: string;
      /**
       * Outcomes of the same report that happened earlier, over [now - fromAgoMs, now - toAgoMs] (a worker that
       * reports rarely sends its older successes in one summary): spread over the buckets of that span
       * (window.ts recordSpread) instead of landing in the current one. Not part of `counts`.
       */
      earlier?: SpanCounts;
    }
  | { type: 'probe-request'; requestId: string; requester: string }
  | { type: 'probe-result'; generation: number; outcome: OutcomeKind; latencyMs?: number; retryAfterMs?: number }
  /** The requester will not use the token it asked for (it gave up waiting): release it, count nothing. */
  | { type: 'probe-cancel'; requestId: string }
  | { type: 'force-open'; reason?: string; durationMs?: number }
  | { type: 'force-close'; reason?: string }
  | { type: 'reset'; reason?: string }
  /** Metrics-only: record and report what it would do, never block. */
  | { type: 'disable'; reason?: string }
  | { type: 'enable'; reason?: string }
  /**
   * Changes fields of the configuration; unnamed fields keep their values, and the result is held to
   * POLICY_BOUNDS. A change to probesToClose or probeTrials while half-open starts the probe round again, so
   * no round is judged by two rules.
   */
  | { type: 'configure'; config: PolicyConfigInput };

/** Outcomes over a past span of time, in ms before the event: see the report event's `earlier`. */
export interface SpanCounts {
  counts: Partial<OutcomeCounts>;
  latency?: number[];
  fromAgoMs: number;
  toAgoMs: number;
}

/** The answer to a probe request. */
export type ProbeDecision =
  | { kind: 'granted'; token: ProbeToken }
  /** Closed (or forced closed, or metrics-only): no token needed, proceed. */
  | { kind: 'not-needed'; state: BreakerStateName }
  | { kind: 'denied'; reason: 'open' | 'forced-open' | 'busy'; retryAfterMs: number | null };

export interface StepResult {
  state: PolicyState;
  transitions: TransitionRecord[];
  /** Set for probe-request events. */
  decision?: ProbeDecision;
  /** Why an event changed nothing it asked for (a stale probe result, a rejected configuration). */
  ignored?: string;
  /** A failure-ratio rule held but its failures came from too few reporters (quorum.ts): no trip, and why. */
  declined?: string;
  /** A probe result counted as a trial: success, or failure (a failed or too slow probe, reopening or not). */
  trial?: 'success' | 'failure';
}

/**
 * The little a worker needs to decide calls, as the entity's `view` query returns it: absolute times, so a
 * worker applies it with its own clock (`permitFor`) while the view is up to a second old.
 */
export interface BreakerView {
  state: BreakerStateName;
  mode: Mode;
  phase: Phase;
  cooldownUntil: number | null;
  forcedUntil: number | null;
  rampStartedAt: number | null;
  rampMs: number;
  rampFloor: number;
  probesOutstanding: number;
  maxConcurrentProbes: number;
  /** The latest probe generation granted: a report says which it saw, so late ones can be told apart. */
  generation: number;
  /** Present with maxRequestsPerSecond: the fleet-wide rate, and the workers sharing it now. */
  rateLimit?: number;
  activeReporters?: number;
  /**
   * The workers reporting lately, coarse (1, 2, 4, 8 ... rounded up: it changes, and the memo with it, only when
   * the fleet doubles or halves). Guards space their success reports by it. Absent from entities before it.
   */
  reporters?: number;
  /** Present after a 429 with Retry-After: no worker sends to the endpoint before this time (its own clock). */
  pacedUntil?: number;
  /**
   * The fleet's recent health, for a guard's quarantine (src/activities/guard/quarantine.ts): the window's
   * failure ratio (to 0.05) and the reporters heard from lately. Absent from entities before it: no comparison.
   */
  fleet?: {
    failureRatio: number;
    reporters: number;
    /**
     * How long the fleet's recent calls say a call may stay in flight before it counts as stalled (the window's
     * p95 plus four mean deviations, policy.ts's windowStall), for a guard that has not seen enough calls
     * of its own. Coarse (it moves when it changes by a quarter). Absent before the window holds enough
     * latency samples, and from entities before it.
     */
    stallMs?: number;
  };
}

/** What a worker needs to decide a call: from `permit()` or `permitFor()`. */
export interface Permit {
  state: BreakerStateName;
  /** May ordinary traffic go to the endpoint? */
  allow: boolean;
  /** When to come back, for refusals with a known end. */
  retryAfterMs: number | null;
  /** Fraction (0..1] of normal concurrency allowed now: the ramp after a recovery. */
  allowance: number;
  /** Half-open: only a probe-token holder may call. */
  probeRequired: boolean;
}
