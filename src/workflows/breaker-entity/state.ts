import { log, workflowInfo } from '@temporalio/workflow';
import {
  breakerView,
  nextDeadline,
  permit,
  stateName,
  step,
  windowFigures,
  windowStall,
  type BreakerView,
  type PolicyEvent,
  type PolicyState,
  type ProbeDecision,
  type StepResult,
  type TransitionReason,
  type TransitionRecord,
} from '../../breaker';
import type {
  BreakerStatus,
  CarriedState,
  EntityCounters,
  EntityExit,
  EntityInput,
  EntityOptions,
  ProbeSpec,
} from '../../messages/breaker';
import { carry, restore } from './carry';
import { initialPolicy } from './config';
import { EntityMetrics } from './metrics';
import { Publication } from './publication';
import { coarseCount, Roster } from './roster';

/** Probe decisions kept for requesters that have not read theirs yet. */
const DECISIONS_KEPT = 256;
/** A worker that has not reported for this long no longer shares the endpoint's rate (guards report every second). */
const REPORTER_TTL_MS = 5_000;
/** A declined trip (quorum not met) goes into the transition log at most this often, so one sick worker cannot flood it. */
const QUORUM_NOTE_MS = 60_000;
/** Reporters seen failing alone, kept for `breaker show`. */
const LONE_FAILERS_KEPT = 16;
/** The longest a rarely reporting worker stays counted past REPORTER_TTL_MS (guards report at least every minute). */
const MAX_LINGER_MS = 125_000;

/**
 * An operator's action, recorded on the transitions it made (not on time-driven ones, such as a timed
 * force-open ending, that the same step may record first).
 */
export interface Origin {
  reason: TransitionReason;
  fields: Pick<TransitionRecord, 'actor' | 'sender'>;
}

/**
 * Everything one entity run knows (carried across continue-as-new), and `apply`: each event goes through the
 * pure policy on the workflow clock with seeded randomness, and what it changed is logged and published.
 */
export class EntityState {
  readonly key: string;
  policy: PolicyState;
  probeSpec: ProbeSpec | null;
  /** Transitions, most recent first. */
  readonly history: TransitionRecord[];
  readonly decisions: Map<string, ProbeDecision>;
  readonly counters: EntityCounters;
  lastReportAt: number;
  lastTransitionAt: number;
  /** Unknown until checked (auto), then carried across continue-as-new. */
  searchAttributesOn: boolean | null;
  /** The latest moment anything happened around probes: the self-probe waits selfProbeDelayMs past it. */
  lastProbeActivityAt: number;
  /** Set when the main loop must recompute its deadlines; plain reports in the closed state do not set it. */
  wake = false;
  /**
   * An operator changed the policy configuration (configure) or the self-probe (set-probe): an idle exit would
   * lose it (the next report starts a run with the worker's configuration), so the entity stays.
   */
  operatorSet: boolean;
  /** The self-probe spec is an operator's (set-probe, even to none): a report's spec never replaces it. */
  probeByOperator: boolean;
  private readonly publication: Publication;
  /** The fleet-wide counters (transitions, opens, open time, probes): see metrics.ts. */
  private readonly metrics: EntityMetrics;
  /**
   * Workers heard from lately, by reporter id: they share the endpoint's rate limit, when it has one. Carried
   * across continue-as-new, so a new run does not publish "nobody" and let every worker take the whole rate.
   */
  private readonly reporters: Roster;
  /** What each reporter said it had in flight, and when: their sum is the fleet's concurrency. Carried too. */
  private readonly inFlight: Map<string, { at: number; n: number }>;
  /** Reporters whose failures alone held a ratio rule that the quorum then declined (newest last; this run only). */
  private readonly loneFailers = new Map<string, { at: number; count: number }>();
  /** When a declined trip was last written to the transition log. */
  private quorumNotedAt = Number.NEGATIVE_INFINITY;
  /** The fleet's stall threshold as the view last gave it (null: none yet): moved only by a quarter or more. */
  private stallMs: number | null = null;

  constructor(
    input: EntityInput,
    private readonly opts: Required<EntityOptions>,
  ) {
    const { key } = input;
    // Whatever release carried it (restore migrates older shapes).
    const carried = input.carried ? restore(input.carried) : undefined;
    this.key = key;
    this.policy = carried?.policy ?? initialPolicy(key, input.config);
    this.probeSpec = input.probe ?? null;
    this.history = carried ? [...carried.log] : [];
    this.decisions = new Map(carried?.decisions ?? []);
    this.counters = carried?.counters ?? {
      reports: 0,
      probeRequests: 0,
      selfProbes: 0,
      ignoredResults: 0,
      continuedAsNew: 0,
    };
    this.lastReportAt = carried?.lastReportAt ?? Date.now();
    this.lastTransitionAt = carried?.lastTransitionAt ?? 0;
    this.searchAttributesOn =
      input.carried?.searchAttributesOn ?? (opts.searchAttributes === 'auto' ? null : opts.searchAttributes);
    this.lastProbeActivityAt = Date.now();
    this.operatorSet = carried?.operatorSet ?? false;
    this.probeByOperator = carried?.probeByOperator ?? false;
    this.publication = new Publication(key);
    this.reporters = new Roster(carried?.reporters, REPORTER_TTL_MS);
    this.inFlight = new Map((carried?.inFlight ?? []).map(([id, at, n]) => [id, { at, n }]));
    this.metrics = new EntityMetrics(key, stateName(this.policy), this.history, this.policy.openedAt, Date.now());
    this.metrics.zero();
    // A continued run starts with the threshold its carried window gives, not without one until a report.
    if (carried) this.noteStallMs(Date.now());
  }

  /** Applies one policy event; `origin`: the operator's action that sent it. */
  apply(event: PolicyEvent, origin?: Origin): StepResult {
    // The workflow clock stands still within an activation: read once (each read costs, on every report).
    const now = Date.now();
    const before = nextDeadline(this.policy, now);
    const out = step(this.policy, event, now, Math.random());
    this.policy = out.state;
    this.metrics.applied(event, out);
    if (out.transitions.length) {
      for (const made of out.transitions) {
        const t = origin && made.reason === origin.reason ? { ...made, ...origin.fields } : made;
        this.history.unshift(t);
        this.lastTransitionAt = t.at;
        log.info('breaker transition', {
          key: this.key,
          from: t.from,
          to: t.to,
          reason: t.reason,
          detail: t.detail,
          cooldownMs: t.cooldownMs,
        });
        if (t.to === 'half-open') this.lastProbeActivityAt = t.at;
      }
      this.history.length = Math.min(this.history.length, this.opts.logSize);
      this.publishState();
    }
    if (out.transitions.length || nextDeadline(this.policy, now) !== before) this.wake = true;
    if (event.type === 'report') this.noteStallMs(now);
    this.publishView();
    return out;
  }

  /**
   * A signal refused whole: counted, and logged with the problem cut short (a payload may be huge). `logged`:
   * false when the caller already logged why.
   */
  refused(signal: string, problem: string, logged = true): void {
    this.counters.refusedSignals = (this.counters.refusedSignals ?? 0) + 1;
    this.metrics.refused(signal);
    if (logged)
      log.warn('breaker signal refused', {
        key: this.key,
        signal,
        problem: problem.length > 500 ? `${problem.slice(0, 499)}…` : problem,
      });
  }

  /** A worker reported: it shares the endpoint's rate for a while (longer if it says it reports rarely). */
  heardFrom(reporter: string, everyMs?: number): void {
    this.reporters.heard(reporter, Date.now(), this.lingerMs(everyMs));
  }

  /**
   * A reporter said how many calls it had in flight: the fleet's concurrency now, the sum over the reporters
   * heard from within REPORTER_TTL_MS (and their linger).
   */
  concurrency(reporter: string, inFlight: number, everyMs?: number): number {
    const now = Date.now();
    this.inFlight.set(reporter, { at: now + this.lingerMs(everyMs), n: Math.max(0, inFlight) });
    let sum = 0;
    for (const [id, r] of this.inFlight) {
      if (now - r.at > REPORTER_TTL_MS) this.inFlight.delete(id);
      else sum += r.n;
    }
    return sum;
  }

  /**
   * A report held a failure-ratio rule the quorum declined: counted, its reporter remembered for `breaker show`,
   * and written to the transition log at most once per QUORUM_NOTE_MS.
   */
  declined(reporter: string, detail: string): void {
    const now = Date.now();
    this.counters.quorumDeclined = (this.counters.quorumDeclined ?? 0) + 1;
    const seen = this.loneFailers.get(reporter);
    this.loneFailers.delete(reporter);
    this.loneFailers.set(reporter, { at: now, count: (seen?.count ?? 0) + 1 });
    while (this.loneFailers.size > LONE_FAILERS_KEPT) this.loneFailers.delete(this.loneFailers.keys().next().value!);
    if (now - this.quorumNotedAt < QUORUM_NOTE_MS) return;
    this.quorumNotedAt = now;
    const state = stateName(this.policy);
    this.history.unshift({
      at: now,
      from: state,
      to: state,
      reason: 'quorum-not-met',
      detail: `${detail}; reporter ${reporter}`,
    });
    this.history.length = Math.min(this.history.length, this.opts.logSize);
    log.info('breaker trip declined', { key: this.key, reporter, detail });
  }

  /**
   * Follows the fleet's stall threshold, coarsely: the view is in the memo, and a memo upsert per report (a
   * threshold that wavers by a few percent) would grow the history for nothing a guard needs. It moves when it
   * changes by more than a quarter, and is dropped once the window holds no latency at all (a figure from
   * another time must not outlive it).
   */
  noteStallMs(now: number): void {
    const { stallMs: ms, samples } = windowStall(this.policy, now);
    if (ms === null) {
      if (samples === 0) this.stallMs = null;
      return;
    }
    if (this.stallMs === null || Math.abs(ms - this.stallMs) > this.stallMs / 4) this.stallMs = Math.round(ms);
  }

  view(): BreakerView {
    // Counted once (pure: the `view` and `status` queries call it too): the view is built on every report.
    const now = Date.now();
    const active = this.reporters.active(now);
    const v = breakerView(this.policy, this.policy.config.maxRequestsPerSecond ? active : 0);
    const view = { ...v, reporters: coarseCount(active) };
    // Coarse (to 0.05), so the memo changes with the fleet's health, not with every report.
    const ratio = Math.round(windowFigures(this.policy, now).failureRatio * 20) / 20;
    return {
      ...view,
      fleet: { failureRatio: ratio, reporters: active, ...(this.stallMs !== null ? { stallMs: this.stallMs } : {}) },
    };
  }

  /**
   * How much longer than REPORTER_TTL_MS a reporter that sends a report every `everyMs` stays counted: two of
   * its intervals and a second (its jitter and a slow signal), at most MAX_LINGER_MS. None when the report does
   * not say.
   */
  private lingerMs(everyMs: number | undefined): number {
    if (typeof everyMs !== 'number' || !Number.isFinite(everyMs) || everyMs <= 0) return 0;
    return Math.min(MAX_LINGER_MS, Math.max(0, 2 * everyMs + 1_000 - REPORTER_TTL_MS));
  }

  publishView(): void {
    this.publication.view(() => this.view());
  }

  publishState(): void {
    this.publication.state(stateName(this.policy), this.searchAttributesOn);
  }

  /** Keeps a probe request's decision for its requester to read (the most recent DECISIONS_KEPT). */
  remember(requestId: string, decision: ProbeDecision): void {
    this.decisions.delete(requestId);
    this.decisions.set(requestId, decision);
    while (this.decisions.size > DECISIONS_KEPT) this.decisions.delete(this.decisions.keys().next().value!);
  }

  /**
   * The decision for a probe request, as the `probeDecision` query answers it: a recent one as given, and a grant
   * whose token is still out from the token itself, however many decisions came after it and across
   * continue-as-new (which carries the tokens whole but only the newest decisions). A query reads state and adds
   * no command, so histories replay as they ran.
   */
  decision(requestId: string): ProbeDecision | null {
    const held = this.policy.probes.find((t) => t.requestId === requestId);
    if (held) return { kind: 'granted', token: held };
    return this.decisions.get(requestId) ?? null;
  }

  status(): BreakerStatus {
    const { policy } = this;
    return {
      key: this.key,
      view: this.view(),
      permit: permit(policy, Date.now()),
      asOf: Date.now(),
      openedAt: policy.openedAt,
      consecutiveOpens: policy.consecutiveOpens,
      probes: policy.probes.map(({ generation, holder, grantedAt, leaseUntil }) => ({
        generation,
        holder,
        grantedAt,
        leaseUntil,
      })),
      probeSuccesses: policy.probeSuccesses,
      probeFailures: policy.probeFailures,
      failedTrials: policy.failedTrials,
      figures: windowFigures(policy, Date.now()),
      config: policy.config,
      probe: this.probeSpec,
      lastReportAt: this.lastReportAt,
      counters: { ...this.counters },
      historyLength: workflowInfo().historyLength,
      searchAttributes: this.searchAttributesOn,
      loneFailers: [...this.loneFailers].reverse().map(([reporter, r]) => ({ reporter, ...r })),
    };
  }

  /** Everything the next run needs (called by the main loop, an event: the stale reporters are forgotten first). */
  carried(): CarriedState {
    this.reporters.prune(Date.now());
    for (const [id, r] of this.inFlight) if (Date.now() - r.at > REPORTER_TTL_MS) this.inFlight.delete(id);
    const inFlight = [...this.inFlight].map(([id, r]): [string, number, number] => [id, r.at, r.n]);
    const parts = {
      policy: this.policy,
      log: this.history,
      lastReportAt: this.lastReportAt,
      lastTransitionAt: this.lastTransitionAt,
      decisions: [...this.decisions],
      counters: this.counters,
      searchAttributesOn: this.searchAttributesOn ?? false,
      reporters: this.reporters.entries(),
      inFlight,
      operatorSet: this.operatorSet,
      probeByOperator: this.probeByOperator,
    };
    return carry(parts, Date.now());
  }

  /** What a run that finished idle returns. */
  exit(): EntityExit {
    return { key: this.key, reason: 'idle', counters: this.counters, transitions: this.history };
  }
}
