import {
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  patched,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import {
  breakerView,
  ConfigError,
  initialState,
  nextDeadline,
  parsePolicyConfig,
  permit,
  stateName,
  step,
  windowFigures,
  type PolicyEvent,
  type PolicyState,
  type AdminSender,
  type StepResult,
  type TransitionReason,
  type TransitionRecord,
} from '../breaker';
import {
  adminSignal,
  cancelProbeSignal,
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  statusQuery,
  transitionsQuery,
  viewQuery,
  type AdminAction,
  type CarriedState,
  type EntityCounters,
  type EntityExit,
  type EntityInput,
  type EntityOptions,
  type ProbeSpec,
} from '../messages/breaker';
import type { BreakerActivities } from '../messages/activities';
import { BREAKER_KEY, BREAKER_STATE } from '../messages/search-attributes';

const DEFAULTS: Required<EntityOptions> = {
  idleMs: 3_600_000,
  selfProbeDelayMs: 2_000,
  maxHistoryEvents: 2_000,
  logSize: 500,
  searchAttributes: 'auto',
};
/** Probe decisions kept for requesters that have not read theirs yet. */
const DECISIONS_KEPT = 256;
/** A worker that has not reported for this long no longer shares the endpoint's rate (guards report every second). */
const REPORTER_TTL_MS = 5_000;

/**
 * One breaker, fleet-wide: the long-lived entity workflow `breaker/<key>` (see DESIGN.md). It holds the
 * policy state and drives it with the workflow clock and seeded randomness; workers report outcomes and ask
 * for probe tokens by signal and read the state by query. Cooldowns, leases and timed force-opens run on
 * durable timers; when half-open and nobody asks for a probe, the entity probes the endpoint itself.
 */
export async function breakerEntityWorkflow(input: EntityInput): Promise<EntityExit> {
  const { key } = input;
  const opts: Required<EntityOptions> = { ...DEFAULTS, ...input.options };
  const carried: CarriedState | undefined = input.carried;
  // Rate limits arrived after entities were already running: a run recorded before them must replay as it
  // ran, when a maxRequestsPerSecond it could not know was rejected (configure) or not there (defaults).
  const rateLimits = patched('rate-limit');
  const withoutRate = <C extends object | undefined>(c: C): C => {
    if (rateLimits || !c || !('maxRequestsPerSecond' in c)) return c;
    const { maxRequestsPerSecond: _dropped, ...rest } = c as { maxRequestsPerSecond?: unknown };
    return rest as C;
  };
  let policy: PolicyState = carried?.policy ?? initialState(parseConfig(key, withoutRate(input.config)));
  let probeSpec: ProbeSpec | null = input.probe ?? null;
  const history: TransitionRecord[] = carried?.log ?? [];
  const decisions = new Map(carried?.decisions ?? []);
  const counters: EntityCounters = carried?.counters ?? { reports: 0, probeRequests: 0, selfProbes: 0, ignoredResults: 0, continuedAsNew: 0 };
  let lastReportAt = carried?.lastReportAt ?? Date.now();
  let lastTransitionAt = carried?.lastTransitionAt ?? 0;
  // Unknown until checked (auto), then carried across continue-as-new.
  let searchAttributesOn: boolean | null = carried?.searchAttributesOn ?? (opts.searchAttributes === 'auto' ? null : opts.searchAttributes);
  // Self-probes that got no answer (404, 400, 429, activity failure) back off: a wrong probe URL must not
  // hit the endpoint every two seconds forever, and a 429 is honoured.
  let selfProbeBackoffMs = 0;
  // The latest moment anything happened around probes: the self-probe waits selfProbeDelayMs past it.
  let lastProbeActivityAt = Date.now();
  let selfProbeRunning = false;
  // Set when the main loop must recompute its deadlines; plain reports in the closed state do not set it.
  let wake = false;

  // The view also goes into the memo, where guards read it with DescribeWorkflowExecution: the server answers
  // that from its own store, so a read never queues behind the entity's workflow tasks as a query does while
  // a fleet's reports pour in. (Runs recorded before the memo existed replay without it.)
  const viewInMemo = patched('view-memo');
  let memoView = '';
  // Workers heard from lately, by reporter id: they share the endpoint's rate limit, when it has one. Carried
  // across continue-as-new, so a new run does not publish "nobody" and let every worker take the whole rate.
  const reporters = new Map<string, number>(carried?.reporters ?? []);
  const activeReporters = () => {
    for (const [id, at] of reporters) if (Date.now() - at > REPORTER_TTL_MS) reporters.delete(id);
    return reporters.size;
  };
  const view = () => breakerView(policy, policy.config.maxRequestsPerSecond ? activeReporters() : 0);
  const publishView = () => {
    if (!viewInMemo) return;
    const v = view();
    const text = JSON.stringify(v);
    if (text === memoView) return;
    memoView = text;
    upsertMemo({ view: v });
  };

  const publish = () => {
    if (!searchAttributesOn) return;
    upsertSearchAttributes([
      { key: BREAKER_STATE, value: stateName(policy) },
      { key: BREAKER_KEY, value: key },
    ]);
  };

  // `origin`: an operator's action, recorded on the transitions it made (not on time-driven ones, such as a
  // timed force-open ending, that the same step may record first).
  const apply = (event: PolicyEvent, origin?: { reason: TransitionReason; fields: Pick<TransitionRecord, 'actor' | 'sender'> }): StepResult => {
    const before = nextDeadline(policy, Date.now());
    const out = step(policy, event, Date.now(), Math.random());
    policy = out.state;
    if (out.transitions.length) {
      for (const made of out.transitions) {
        const t = origin && made.reason === origin.reason ? { ...made, ...origin.fields } : made;
        history.unshift(t);
        lastTransitionAt = t.at;
        log.info('breaker transition', { key, from: t.from, to: t.to, reason: t.reason, detail: t.detail, cooldownMs: t.cooldownMs });
        if (t.to === 'half-open') lastProbeActivityAt = t.at;
      }
      history.length = Math.min(history.length, opts.logSize);
      publish();
    }
    if (out.transitions.length || nextDeadline(policy, Date.now()) !== before) wake = true;
    publishView();
    return out;
  };

  // A handler must never throw: a failed workflow task would stall the breaker for the whole fleet.
  const guarded =
    <A extends unknown[]>(name: string, fn: (...args: A) => void) =>
    (...args: A) => {
      try {
        fn(...args);
      } catch (err) {
        log.error('breaker signal rejected', { key, signal: name, error: err instanceof Error ? err.message : String(err) });
      }
    };

  setHandler(
    reportSignal,
    guarded('report', (r) => {
      counters.reports++;
      if (r.generation !== undefined && r.generation < policy.lastGeneration && stateName(policy) !== 'closed') {
        counters.lateReports = (counters.lateReports ?? 0) + 1;
      }
      lastReportAt = Date.now();
      if (r.reporter) reporters.set(r.reporter, Date.now());
      apply({ type: 'report', counts: r.counts ?? {}, ...(r.latency ? { latency: r.latency } : {}), ...(r.retryAfterMs ? { retryAfterMs: r.retryAfterMs } : {}) });
    }),
  );
  setHandler(
    requestProbeSignal,
    guarded('requestProbe', (r) => {
      counters.probeRequests++;
      lastProbeActivityAt = Date.now();
      const { decision } = apply({ type: 'probe-request', requestId: r.requestId, requester: r.requester });
      if (!decision) return;
      remember(r.requestId, decision);
    }),
  );
  setHandler(
    probeResultSignal,
    guarded('probeResult', (r) => {
      lastProbeActivityAt = Date.now();
      const out = apply({
        type: 'probe-result',
        generation: r.generation,
        outcome: r.outcome,
        ...(r.latencyMs !== undefined ? { latencyMs: r.latencyMs } : {}),
        ...(r.retryAfterMs ? { retryAfterMs: r.retryAfterMs } : {}),
      });
      if (out.ignored) {
        counters.ignoredResults++;
        log.info('probe result ignored', { key, why: out.ignored, reporter: r.reporter });
      }
    }),
  );
  setHandler(
    cancelProbeSignal,
    guarded('cancelProbe', ({ requestId }) => {
      lastProbeActivityAt = Date.now();
      apply({ type: 'probe-cancel', requestId });
    }),
  );
  setHandler(
    adminSignal,
    guarded('admin', (a: AdminAction) => {
      if (a.action === 'set-probe') {
        probeSpec = a.probe;
        wake = true;
        return;
      }
      // Before rate limits, a configure naming maxRequestsPerSecond was rejected whole (unknown field): so it is here.
      const unknownField = a.action === 'configure' && !rateLimits && 'maxRequestsPerSecond' in a.config;
      const origin = { reason: ADMIN_REASON[a.action], fields: adminOrigin(a) };
      const out = apply(adminEvent(unknownField ? { ...a, config: { ...a.config, maxRequestsPerSecond: 'unknown to this run' as never } } : a), origin);
      if (out.ignored) log.warn('admin signal ignored', { key, action: a.action, why: out.ignored });
    }),
  );
  setHandler(viewQuery, view);
  setHandler(transitionsQuery, (limit?: number) => history.slice(0, limit ?? history.length));
  setHandler(probeDecisionQuery, (requestId: string) => decisions.get(requestId) ?? null);
  setHandler(statusQuery, () => ({
    key,
    view: view(),
    permit: permit(policy, Date.now()),
    asOf: Date.now(),
    openedAt: policy.openedAt,
    consecutiveOpens: policy.consecutiveOpens,
    probes: policy.probes.map(({ generation, holder, grantedAt, leaseUntil }) => ({ generation, holder, grantedAt, leaseUntil })),
    probeSuccesses: policy.probeSuccesses,
    figures: windowFigures(policy, Date.now()),
    config: policy.config,
    probe: probeSpec,
    lastReportAt,
    counters: { ...counters },
    historyLength: workflowInfo().historyLength,
    searchAttributes: searchAttributesOn,
  }));

  function remember(requestId: string, decision: NonNullable<StepResult['decision']>): void {
    decisions.delete(requestId);
    decisions.set(requestId, decision);
    while (decisions.size > DECISIONS_KEPT) decisions.delete(decisions.keys().next().value!);
  }

  // Options follow the live configuration (a `configure` may change the lease).
  const probeActivity = () =>
    proxyActivities<BreakerActivities>({
      // One attempt: a failed probe is an answer, and the next comes after the next cooldown.
      retry: { maximumAttempts: 1 },
      startToCloseTimeout: policy.config.probeLeaseMs,
      // If no worker takes the probe, it gives up with the lease; traffic or a later self-probe tries again.
      scheduleToCloseTimeout: policy.config.probeLeaseMs,
    });

  const selfProbeDue = (): number | null => {
    if (!probeSpec || selfProbeRunning || policy.mode !== 'auto' || policy.phase !== 'half-open' || policy.probes.length > 0) return null;
    return lastProbeActivityAt + opts.selfProbeDelayMs + selfProbeBackoffMs;
  };
  const backOffSelfProbe = (atLeastMs = 0) => {
    const cap = policy.config.cooldownMs * policy.config.cooldownMaxFactor;
    selfProbeBackoffMs = Math.min(cap, Math.max(atLeastMs, selfProbeBackoffMs ? selfProbeBackoffMs * 2 : opts.selfProbeDelayMs));
  };

  const selfProbe = async (spec: ProbeSpec) => {
    selfProbeRunning = true;
    try {
      const requestId = `self-${uuid4()}`;
      const { decision } = apply({ type: 'probe-request', requestId, requester: 'entity' });
      if (decision?.kind !== 'granted') return;
      counters.selfProbes++;
      try {
        const result = await probeActivity().probeEndpoint(spec);
        apply({ type: 'probe-result', generation: decision.token.generation, outcome: result.outcome, latencyMs: result.latencyMs, ...(result.retryAfterMs ? { retryAfterMs: result.retryAfterMs } : {}) });
        if (result.outcome === 'success' || result.outcome === 'transient' || result.outcome === 'service-exception') {
          selfProbeBackoffMs = 0;
        } else {
          // 404 / 400 / 401 / 429: no verdict on health. Say so loudly, and do not hammer the endpoint.
          backOffSelfProbe(result.retryAfterMs ?? 0);
          log.warn('self-probe got no verdict; check the probe spec', { key, url: spec.url, outcome: result.outcome, reason: result.reason, nextInMs: selfProbeBackoffMs });
        }
      } catch (err) {
        // The probe activity itself failed (no worker, a crash): that says nothing about the endpoint.
        apply({ type: 'probe-cancel', requestId });
        backOffSelfProbe();
        log.warn('self-probe activity failed; token released', { key, error: err instanceof Error ? err.message : String(err) });
      }
    } finally {
      selfProbeRunning = false;
      lastProbeActivityAt = Date.now();
      wake = true;
    }
  };

  const historyFull = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= opts.maxHistoryEvents;

  publishView();
  if (searchAttributesOn === null) {
    try {
      const check = proxyActivities<BreakerActivities>({ startToCloseTimeout: '10s', scheduleToCloseTimeout: '30s', retry: { maximumAttempts: 2 } });
      searchAttributesOn = await check.breakerSearchAttributesRegistered();
    } catch (err) {
      searchAttributesOn = false;
      log.warn('could not check the search attributes; not keeping them', { key, error: err instanceof Error ? err.message : String(err) });
    }
    if (!searchAttributesOn) log.warn('BreakerState / BreakerKey are not registered in this namespace: breakers will not be listable by state', { key });
  }
  publish();
  // Idle means closed and quiet: no reports and no transitions for idleMs. Runs recorded before this rule
  // (idle counted from the last report only) keep the old rule on replay.
  const idleCountsTransitions = patched('idle-after-last-transition');
  const idleAt = () => (idleCountsTransitions ? Math.max(lastReportAt, lastTransitionAt) : lastReportAt) + opts.idleMs;
  for (;;) {
    const now = Date.now();
    const idle = policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0;
    const due = [nextDeadline(policy, now), selfProbeDue(), idle ? idleAt() : null].filter((t): t is number => t !== null);
    const until = due.length ? Math.max(Math.min(...due), now + 1) : null;
    wake = false;
    if (until === null) await condition(() => wake || historyFull());
    else await condition(() => wake || historyFull(), until - now);
    apply({ type: 'tick' });
    wake = false;

    const selfProbeAt = selfProbeDue();
    if (probeSpec && selfProbeAt !== null && selfProbeAt <= Date.now()) void selfProbe(probeSpec);

    if (policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0 && Date.now() >= idleAt()) {
      await condition(allHandlersFinished);
      if (Date.now() >= idleAt()) return { key, reason: 'idle', counters, transitions: history };
    }
    if (historyFull()) {
      // Finish in-flight work first, so the next run starts with everything this one knew.
      await condition(() => allHandlersFinished() && !selfProbeRunning);
      counters.continuedAsNew++;
      await continueAsNew<typeof breakerEntityWorkflow>({
        key,
        ...(probeSpec ? { probe: probeSpec } : {}),
        ...(input.options ? { options: input.options } : {}),
        carried: {
          policy,
          log: history,
          lastReportAt,
          lastTransitionAt,
          decisions: [...decisions],
          counters,
          searchAttributesOn: searchAttributesOn ?? false,
          ...(reporters.size ? { reporters: [...reporters] } : {}),
        },
      });
    }
  }
}


type RecordedAdminAction = Exclude<AdminAction, { action: 'set-probe' }>;

/** The transition each admin action records. */
const ADMIN_REASON: Record<RecordedAdminAction['action'], TransitionReason> = {
  'force-open': 'forced-open',
  'force-close': 'forced-close',
  reset: 'reset',
  disable: 'disabled',
  enable: 'enabled',
  configure: 'configured',
};

/**
 * The sender as the signal gave it, as strings whatever arrived (a handler must not throw), or none: admin
 * signals recorded before the CLI sent one have none.
 */
function senderOf(a: AdminAction): AdminSender | undefined {
  const s: unknown = a.sender;
  if (!s || typeof s !== 'object') return undefined;
  const field = (name: keyof AdminSender) => {
    const v = (s as Record<string, unknown>)[name];
    return typeof v === 'string' && v ? v : '?';
  };
  return { identity: field('identity'), user: field('user'), host: field('host') };
}

/** The structured "who" a transition from this action carries: the claimed actor and the sender, when given. */
function adminOrigin(a: AdminAction): Pick<TransitionRecord, 'actor' | 'sender'> {
  const sender = senderOf(a);
  return { ...(a.actor !== undefined ? { actor: String(a.actor) } : {}), ...(sender ? { sender } : {}) };
}

/**
 * The transition detail's "who". Without a sender (signals from before it existed, or from code that sends
 * none): `by <actor>`, as it always was. With one: the free-text actor quoted and labelled as claimed (so it
 * cannot pass for the part that follows), then the sending process: `by "alice", claimed; sent by
 * 1234@host as root@host`.
 */
function adminWho(a: AdminAction): string | undefined {
  const sender = senderOf(a);
  if (!sender) return a.actor ? `by ${a.actor}` : undefined;
  const sent = `sent by ${sender.identity} as ${sender.user}@${sender.host}`;
  return a.actor ? `by ${JSON.stringify(String(a.actor))}, claimed; ${sent}` : sent;
}

function adminEvent(a: RecordedAdminAction): PolicyEvent {
  const who = adminWho(a);
  const reason = a.reason ? (who ? `${a.reason} (${who})` : a.reason) : who;
  const withReason = reason ? { reason } : {};
  switch (a.action) {
    case 'force-open':
      return { type: 'force-open', ...withReason, ...(a.durationMs !== undefined ? { durationMs: a.durationMs } : {}) };
    case 'configure':
      return { type: 'configure', config: a.config };
    case 'force-close':
    case 'reset':
    case 'disable':
    case 'enable':
      return { type: a.action, ...withReason };
    default:
      throw new Error(`unknown admin action ${JSON.stringify((a as { action?: unknown }).action)}`);
  }
}

/**
 * The entity's configuration. An invalid one does not fail the run (the next report would only start another
 * failing run): the breaker runs on defaults and says why, loudly; `configure` can fix it.
 */
function parseConfig(key: string, config: EntityInput['config']) {
  try {
    return parsePolicyConfig(config ?? {});
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    log.error('invalid breaker configuration; running on defaults', { key, error: err.message });
    return parsePolicyConfig({});
  }
}
