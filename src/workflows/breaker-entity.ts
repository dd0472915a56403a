import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from '../activities';
import {
  breakerView,
  ConfigError,
  initialState,
  nextDeadline,
  parsePolicyConfig,
  stateName,
  step,
  windowFigures,
  type PolicyEvent,
  type PolicyState,
  type StepResult,
  type TransitionRecord,
} from '../breaker';
import {
  adminSignal,
  probeDecisionQuery,
  probeGrantSignal,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  statusQuery,
  transitionsQuery,
  viewQuery,
  type AdminAction,
  type CarriedState,
  type EntityCounters,
  type EntityInput,
  type EntityOptions,
  type ProbeSpec,
} from './breaker-messages';
import { BREAKER_KEY, BREAKER_STATE } from './search-attributes';

const DEFAULTS: Required<EntityOptions> = {
  idleMs: 3_600_000,
  selfProbeDelayMs: 2_000,
  maxHistoryEvents: 2_000,
  logSize: 500,
  searchAttributes: true,
};
/** Probe decisions kept for requesters that have not read theirs yet. */
const DECISIONS_KEPT = 256;

export interface EntityExit {
  key: string;
  reason: 'idle';
  counters: EntityCounters;
}

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
  let policy: PolicyState = carried?.policy ?? initialState(parseConfig(input.config));
  let probeSpec: ProbeSpec | null = input.probe ?? null;
  const history: TransitionRecord[] = carried?.log ?? [];
  const decisions = new Map(carried?.decisions ?? []);
  const counters: EntityCounters = carried?.counters ?? { reports: 0, probeRequests: 0, selfProbes: 0, ignoredResults: 0, continuedAsNew: 0 };
  let lastReportAt = carried?.lastReportAt ?? Date.now();
  // The latest moment anything happened around probes: the self-probe waits selfProbeDelayMs past it.
  let lastProbeActivityAt = Date.now();
  let selfProbeRunning = false;
  // Set when the main loop must recompute its deadlines; plain reports in the closed state do not set it.
  let wake = false;

  const publish = () => {
    if (!opts.searchAttributes) return;
    upsertSearchAttributes([
      { key: BREAKER_STATE, value: stateName(policy) },
      { key: BREAKER_KEY, value: key },
    ]);
  };

  const apply = (event: PolicyEvent): StepResult => {
    const before = nextDeadline(policy, Date.now());
    const out = step(policy, event, Date.now(), Math.random());
    policy = out.state;
    if (out.transitions.length) {
      for (const t of out.transitions) {
        history.unshift(t);
        log.info('breaker transition', { key, from: t.from, to: t.to, reason: t.reason, detail: t.detail, cooldownMs: t.cooldownMs });
        if (t.to === 'half-open') lastProbeActivityAt = t.at;
      }
      history.length = Math.min(history.length, opts.logSize);
      publish();
    }
    if (out.transitions.length || nextDeadline(policy, Date.now()) !== before) wake = true;
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
      lastReportAt = Date.now();
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
      if (r.replyToWorkflowId) {
        getExternalWorkflowHandle(r.replyToWorkflowId)
          .signal(probeGrantSignal, { key, requestId: r.requestId, decision })
          .catch((err: unknown) => log.warn('probe grant could not be signalled back', { key, to: r.replyToWorkflowId, error: String(err) }));
      }
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
    adminSignal,
    guarded('admin', (a) => {
      if (a.action === 'set-probe') {
        probeSpec = a.probe;
        wake = true;
        return;
      }
      const out = apply(adminEvent(a));
      if (out.ignored) log.warn('admin signal ignored', { key, action: a.action, why: out.ignored });
    }),
  );
  setHandler(viewQuery, () => breakerView(policy));
  setHandler(transitionsQuery, (limit?: number) => history.slice(0, limit ?? history.length));
  setHandler(probeDecisionQuery, (requestId: string) => decisions.get(requestId) ?? null);
  setHandler(statusQuery, () => ({
    key,
    view: breakerView(policy),
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
  }));

  function remember(requestId: string, decision: NonNullable<StepResult['decision']>): void {
    decisions.delete(requestId);
    decisions.set(requestId, decision);
    while (decisions.size > DECISIONS_KEPT) decisions.delete(decisions.keys().next().value!);
  }

  const probe = proxyActivities<typeof activities>({
    // One attempt: a failed probe is an answer, and the next comes after the next cooldown.
    retry: { maximumAttempts: 1 },
    startToCloseTimeout: policy.config.probeLeaseMs,
    // If no worker takes the probe, the token's lease lapses and traffic or a later self-probe tries again.
    scheduleToCloseTimeout: policy.config.probeLeaseMs,
  });

  const selfProbeDue = (): number | null => {
    if (!probeSpec || selfProbeRunning || policy.mode !== 'auto' || policy.phase !== 'half-open' || policy.probes.length > 0) return null;
    return lastProbeActivityAt + opts.selfProbeDelayMs;
  };

  const selfProbe = async (spec: ProbeSpec) => {
    selfProbeRunning = true;
    try {
      const requestId = `self-${uuid4()}`;
      const { decision } = apply({ type: 'probe-request', requestId, requester: 'entity' });
      if (decision?.kind !== 'granted') return;
      counters.selfProbes++;
      try {
        const result = await probe.probeEndpoint(spec);
        apply({ type: 'probe-result', generation: decision.token.generation, outcome: result.outcome, latencyMs: result.latencyMs, ...(result.retryAfterMs ? { retryAfterMs: result.retryAfterMs } : {}) });
      } catch (err) {
        // The probe activity itself failed (no worker, a crash): that says nothing about the endpoint.
        log.warn('self-probe activity failed; its token lapses with its lease', { key, error: err instanceof Error ? err.message : String(err) });
      }
    } finally {
      selfProbeRunning = false;
      lastProbeActivityAt = Date.now();
      wake = true;
    }
  };

  const historyFull = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= opts.maxHistoryEvents;

  publish();
  for (;;) {
    const now = Date.now();
    const idle = policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0;
    const due = [nextDeadline(policy, now), selfProbeDue(), idle ? lastReportAt + opts.idleMs : null].filter((t): t is number => t !== null);
    const until = due.length ? Math.max(Math.min(...due), now + 1) : null;
    wake = false;
    if (until === null) await condition(() => wake || historyFull());
    else await condition(() => wake || historyFull(), until - now);
    apply({ type: 'tick' });
    wake = false;

    const selfProbeAt = selfProbeDue();
    if (probeSpec && selfProbeAt !== null && selfProbeAt <= Date.now()) void selfProbe(probeSpec);

    if (policy.mode === 'auto' && policy.phase === 'closed' && policy.probes.length === 0 && Date.now() >= lastReportAt + opts.idleMs) {
      await condition(allHandlersFinished);
      if (Date.now() >= lastReportAt + opts.idleMs) return { key, reason: 'idle', counters };
    }
    if (historyFull()) {
      // Finish in-flight work first, so the next run starts with everything this one knew.
      await condition(() => allHandlersFinished() && !selfProbeRunning);
      counters.continuedAsNew++;
      await continueAsNew<typeof breakerEntityWorkflow>({
        key,
        ...(probeSpec ? { probe: probeSpec } : {}),
        ...(input.options ? { options: input.options } : {}),
        carried: { policy, log: history, lastReportAt, decisions: [...decisions], counters },
      });
    }
  }
}


function adminEvent(a: Exclude<AdminAction, { action: 'set-probe' }>): PolicyEvent {
  const reason = a.reason ? (a.actor ? `${a.reason} (by ${a.actor})` : a.reason) : a.actor ? `by ${a.actor}` : undefined;
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

function parseConfig(config: EntityInput['config']) {
  try {
    return parsePolicyConfig(config ?? {});
  } catch (err) {
    if (err instanceof ConfigError) throw ApplicationFailure.nonRetryable(err.message, 'ConfigError');
    throw err;
  }
}
