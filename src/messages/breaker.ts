/**
 * The breaker entity's messages: one source of truth for the workflow, the worker-side guard, the CLI and
 * tests. Signals carry facts in; queries read state out. Grants go out through the `probeDecision` query.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type {
  AdminSender,
  BreakerStateName,
  BreakerView,
  CarriedPolicyState,
  OutcomeCounts,
  OutcomeKind,
  PackedWindow,
  Permit,
  PolicyConfig,
  PolicyConfigInput,
  PolicyState,
  ProbeDecision,
  SpanCounts,
  TransitionReason,
  TransitionRecord,
  WindowFigures,
} from '../breaker';

/** How the entity tests an endpoint itself when nobody asks for a probe token. */
export interface ProbeSpec {
  /** A cheap, representative request: one known tile, or GetCapabilities. */
  url: string;
  /** Request timeout; default 10 s. */
  timeoutMs?: number;
  /** Headers to send (no credentials: specs are stored in workflow history). */
  headers?: Record<string, string>;
  /**
   * A source in a sources file under the worker's sources roots: the probe sends its headers and credentials,
   * read on the worker at probe time (the spec names the file and the source, and carries no secret), and only
   * to that source's own endpoint. How a source with credentials probes on its own.
   */
  source?: ProbeSource;
  /** Statuses that count as healthy whatever the body; default: none (the answer is judged like a tile). */
  okStatuses?: number[];
  /**
   * The Content-Type a healthy answer has. An image type, or none: the answer must be a decodable image, as a
   * tile must. Another type (e.g. "text/xml" for GetCapabilities): a 2xx of that type is healthy.
   */
  contentTypePrefix?: string;
}

/** The sources file and source whose headers and credentials a probe sends. */
export interface ProbeSource {
  file: string;
  name: string;
}

/** The self-probe activity's answer. */
export interface ProbeOutcome {
  outcome: OutcomeKind;
  latencyMs: number;
  httpStatus: number | null;
  retryAfterMs?: number;
  reason: string;
}

export interface EntityOptions {
  /** A closed breaker with no reports for this long finishes; the next report re-creates it. Default 1 h. */
  idleMs?: number;
  /** Half-open with no probe request for this long: the entity probes by itself. Default 2 s. */
  selfProbeDelayMs?: number;
  /**
   * Continue-as-new after this many history events (or when the server suggests it). Default 1,000 (2,000 for
   * runs started before the bounded carry).
   */
  maxHistoryEvents?: number;
  /** Transitions kept in the log. Default 500. */
  logSize?: number;
  /**
   * Keep the BreakerState / BreakerKey search attributes current: `auto` (default) checks once per entity, by
   * an activity, that the namespace has them registered (an unregistered one would fail every workflow task);
   * true upserts without checking; false never.
   */
  searchAttributes?: boolean | 'auto';
}

/**
 * Everything continue-as-new carries, at most about 60 KB of JSON (src/workflows/breaker-entity/carry.ts). Runs
 * from before that bound carried the whole log and the window in `policy`; a new run reads both forms.
 */
export interface CarriedState {
  /** The policy state (of any release's shape); its window is in `window` when that is present. */
  policy: PolicyState | CarriedPolicyState;
  /** The policy's window, packed (absent in payloads from before the bound). */
  window?: PackedWindow;
  /** The search-attribute check's answer, so a new run does not ask again. */
  searchAttributesOn?: boolean;
  lastTransitionAt?: number;
  /** The newest transitions as recorded, most recent first. */
  log: TransitionRecord[];
  /** Older transitions in brief, most recent first, after `log`'s. */
  brief?: BriefTransition[];
  lastReportAt: number;
  /** Recent probe decisions by request id, oldest first, so a requester can still read its grant. */
  decisions: [string, ProbeDecision][];
  counters: EntityCounters;
  /** Reporters heard from lately (id, when), for a rate limit's share. */
  reporters?: [string, number][];
  /** Reporters' latest calls in flight (id, when reported, calls), for the fleet's concurrency. */
  inFlight?: [string, number, number][];
  /** An operator changed the configuration or the self-probe: the entity does not end when idle. */
  operatorSet?: boolean;
  /** The self-probe spec was set by an operator (set-probe): a report's spec does not replace it, nor its absence. */
  probeByOperator?: boolean;
}

/**
 * A carried transition without its detail and figures: when (the first row: epoch ms; the others: ms before the
 * previous row's), from, to, why, the cooldown chosen, 1 if shadow.
 */
export type BriefTransition = [
  at: number,
  from: BreakerStateName,
  to: BreakerStateName,
  reason: TransitionReason,
  cooldownMs: number | null,
  shadow?: 1,
];

export interface EntityCounters {
  reports: number;
  /** Reports of calls decided on a view older than the latest probe round, arriving while not closed. */
  lateReports?: number;
  /** Failures counted for calls still in flight past the stall threshold (a hanging or very slow endpoint). */
  stalled?: number;
  /** Reports on which a failure-ratio rule held but its failures came from too few reporters (the quorum). */
  quorumDeclined?: number;
  probeRequests: number;
  selfProbes: number;
  ignoredResults: number;
  continuedAsNew: number;
  /** Signals refused whole: their payload failed the checks of src/messages/breaker-validation.ts. */
  refusedSignals?: number;
}

export interface EntityInput {
  key: string;
  config?: PolicyConfigInput;
  probe?: ProbeSpec;
  options?: EntityOptions;
  carried?: CarriedState;
}

export interface EntityExit {
  key: string;
  reason: 'idle';
  counters: EntityCounters;
  /** The run's transition log, most recent first: a finished run still answers "was it open last night?". */
  transitions: TransitionRecord[];
}

/** The entity's workflow type, by name: guards start it by signal-with-start without loading workflow code. */
export const BREAKER_ENTITY_WORKFLOW = 'breakerEntityWorkflow';
/** The entity workflow's signature (src/workflows/breaker-entity.ts implements it). */
export type BreakerEntityWorkflow = (input: EntityInput) => Promise<EntityExit>;

export interface OutcomeReport {
  reporter: string;
  /** The probe generation of the view the reporter decided by (see BreakerView.generation). */
  generation?: number;
  counts: Partial<OutcomeCounts>;
  /** Latency histogram over LATENCY_BOUNDS_MS. */
  latency?: number[];
  /** Largest Retry-After (ms) seen with failures. */
  retryAfterMs?: number;
  /**
   * A 429 in this batch asked to wait: how long from now (ms), the longest such. The entity pauses the whole
   * fleet that long (a 429 is never a failure).
   */
  rateLimitedForMs?: number;
  /** The most calls this reporter had in flight to the endpoint since its last report (probes aside). */
  inFlight?: number;
  /** Of the counted transient failures: calls still in flight past the stall threshold (counted while they wait). */
  stalled?: number;
  /**
   * A self-probe the reporter's worker would fetch anyway (a tile URL it fetched with success, no credentials),
   * sent once per worker process and key: an entity with no probe spec adopts it (docs/policy.md).
   */
  probe?: ProbeSpec;
  /**
   * The part of `counts` (and `latency`) that happened earlier, between fromAgoMs and toAgoMs before the report
   * was sent: the entity spreads it over that span. An entity from before it records all of `counts` at arrival.
   */
  earlier?: SpanCounts;
  /** How often this reporter sends its reports now (ms): the entity counts it as active for two of those. */
  everyMs?: number;
  /**
   * Who vouches for these outcomes in the quorum: the reporter's host (stable across restarts) unless configured
   * otherwise. The quorum counts witnesses; without one (older guards), the reporter id.
   */
  witness?: string;
}

export interface ProbeRequest {
  requestId: string;
  requester: string;
}

export interface ProbeResult {
  generation: number;
  outcome: OutcomeKind;
  latencyMs?: number;
  retryAfterMs?: number;
  reporter?: string;
}

/**
 * Who an admin action comes from. `actor` is free text (the CLI's `--actor`) and is recorded as claimed;
 * `sender` is set by the client code from its own process (Temporal client identity, OS user and host).
 * Signals recorded before `sender` existed have none.
 */
interface AdminOrigin {
  actor?: string;
  sender?: AdminSender;
}

export type AdminAction = AdminOrigin &
  (
    | { action: 'force-open'; reason?: string; durationMs?: number }
    | { action: 'force-close'; reason?: string }
    | { action: 'reset'; reason?: string }
    | { action: 'disable'; reason?: string }
    | { action: 'enable'; reason?: string }
    | { action: 'configure'; config: PolicyConfigInput; reason?: string }
    | { action: 'set-probe'; probe: ProbeSpec | null }
  );

/** The full state, for people (the CLI's `breaker show`) and monitoring. */
export interface BreakerStatus {
  key: string;
  view: BreakerView;
  /** What a worker would be told at `asOf`: allowed, retryAfterMs, ramp allowance, probe required. */
  permit: Permit;
  /** Workflow time the status was computed at (the entity's last activity, not necessarily now). */
  asOf: number;
  openedAt: number | null;
  consecutiveOpens: number;
  probes: { generation: number; holder: string; grantedAt: number; leaseUntil: number }[];
  probeSuccesses: number;
  /** Failed probes in this half-open round that did not reopen it (probeTrials); absent from entities before it. */
  probeFailures?: number;
  /** Failed trials in a row since the last trip (the wait after the next grows with them); absent before it. */
  failedTrials?: number;
  figures: WindowFigures;
  config: PolicyConfig;
  probe: ProbeSpec | null;
  lastReportAt: number;
  counters: EntityCounters;
  historyLength: number;
  /** Whether this entity keeps BreakerState / BreakerKey current (null: not checked yet). */
  searchAttributes: boolean | null;
  /**
   * Reporters this run saw failing alone: a failure-ratio rule held on their failures but the quorum was not met
   * (newest first, at most 16; not carried across continue-as-new). Absent from entities before the quorum.
   */
  loneFailers?: { reporter: string; at: number; count: number }[];
}

export const reportSignal = defineSignal<[OutcomeReport]>('report');
export const requestProbeSignal = defineSignal<[ProbeRequest]>('requestProbe');
export const probeResultSignal = defineSignal<[ProbeResult]>('probeResult');
/** A requester gave up waiting for its decision: release a token it may hold, count nothing. */
export const cancelProbeSignal = defineSignal<[{ requestId: string }]>('cancelProbe');
export const adminSignal = defineSignal<[AdminAction]>('admin');

/** Compact view for guards (cached per process for about a second). */
export const viewQuery = defineQuery<BreakerView>('view');
export const statusQuery = defineQuery<BreakerStatus>('status');
/** Transitions, most recent first; optional limit. */
export const transitionsQuery = defineQuery<TransitionRecord[], [number?]>('transitions');
/** The decision for a probe request id, or null while the request has not been processed. */
export const probeDecisionQuery = defineQuery<ProbeDecision | null, [string]>('probeDecision');
