import { log, setHandler, type SignalDefinition } from '@temporalio/workflow';
import { stateName } from '../../breaker';
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
} from '../../messages/breaker';
import { adminCommand } from './admin';
import { splitReport } from './report-span';
import type { EntityState } from './state';

/**
 * The entity's signal and query handlers: signals carry facts into the state, queries read it. `rateLimits`:
 * see the 'rate-limit' patch; `pacing`: the 'rate-limited-pacing' patch (a 429's Retry-After pauses the fleet).
 */
export function registerHandlers(entity: EntityState, rateLimits: boolean, pacing = false): void {
  // The 'report-spacing' patch (entity.spacing): a report's older outcomes spread over their span, and each
  // reporter counted for as long as it says it reports.
  const spacing = entity.spacing;
  const { key } = entity;
  // A handler must never throw: a failed workflow task would stall the breaker for the whole fleet. The handler's
  // arguments are typed by the signal's definition (setHandler alone would infer any[]).
  const onSignal = <A extends unknown[]>(def: SignalDefinition<A>, fn: (...args: A) => void) =>
    setHandler(def, (...args: A) => {
      try {
        fn(...args);
      } catch (err) {
        log.error('breaker signal rejected', { key, signal: def.name, error: err instanceof Error ? err.message : String(err) });
      }
    });

  onSignal(reportSignal, (r) => {
    entity.counters.reports++;
    if (r.generation !== undefined && r.generation < entity.policy.lastGeneration && stateName(entity.policy) !== 'closed') {
      entity.counters.lateReports = (entity.counters.lateReports ?? 0) + 1;
    }
    entity.lastReportAt = Date.now();
    const everyMs = spacing ? r.everyMs : undefined;
    if (r.reporter) entity.heardFrom(r.reporter, everyMs);
    if (r.stalled) entity.counters.stalled = (entity.counters.stalled ?? 0) + r.stalled;
    // Reports from guards that say what they have in flight: the sample floors follow the fleet's concurrency.
    const concurrency = typeof r.inFlight === 'number' && Number.isFinite(r.inFlight) ? entity.concurrency(r.reporter || 'anonymous', r.inFlight, everyMs) : undefined;
    const parts = spacing ? splitReport(r) : { counts: r.counts ?? {}, ...(r.latency ? { latency: r.latency } : {}) };
    entity.apply({
      type: 'report',
      ...parts,
      ...(r.retryAfterMs ? { retryAfterMs: r.retryAfterMs } : {}),
      ...(pacing && r.rateLimitedForMs ? { rateLimitedForMs: r.rateLimitedForMs } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
    });
  });
  onSignal(requestProbeSignal, (r) => {
    entity.counters.probeRequests++;
    entity.lastProbeActivityAt = Date.now();
    const { decision } = entity.apply({ type: 'probe-request', requestId: r.requestId, requester: r.requester });
    if (decision) entity.remember(r.requestId, decision);
  });
  onSignal(probeResultSignal, (r) => {
    entity.lastProbeActivityAt = Date.now();
    const out = entity.apply({
      type: 'probe-result',
      generation: r.generation,
      outcome: r.outcome,
      ...(r.latencyMs !== undefined ? { latencyMs: r.latencyMs } : {}),
      ...(r.retryAfterMs ? { retryAfterMs: r.retryAfterMs } : {}),
    });
    if (out.ignored) {
      entity.counters.ignoredResults++;
      log.info('probe result ignored', { key, why: out.ignored, reporter: r.reporter });
    }
  });
  onSignal(cancelProbeSignal, ({ requestId }) => {
    entity.lastProbeActivityAt = Date.now();
    entity.apply({ type: 'probe-cancel', requestId });
  });
  onSignal(adminSignal, (a: AdminAction) => {
    if (a.action === 'set-probe') {
      entity.probeSpec = a.probe;
      entity.operatorSet = true;
      entity.wake = true;
      return;
    }
    const { event, origin } = adminCommand(a, rateLimits);
    const out = entity.apply(event, origin);
    if (out.ignored) log.warn('admin signal ignored', { key, action: a.action, why: out.ignored });
    else if (a.action === 'configure') entity.operatorSet = true;
  });
  setHandler(viewQuery, () => entity.view());
  setHandler(transitionsQuery, (limit?: number) => entity.history.slice(0, limit ?? entity.history.length));
  setHandler(probeDecisionQuery, (requestId: string) => entity.decisions.get(requestId) ?? null);
  setHandler(statusQuery, () => entity.status());
}
