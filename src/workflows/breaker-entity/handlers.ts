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
  type OutcomeReport,
} from '../../messages/breaker';
import { checkSignal, type CheckedSignal } from '../../messages/breaker-validation';
import { adminCommand } from './admin';
import { splitReport } from './report-span';
import type { EntityState } from './state';

/**
 * The entity's signal and query handlers: signals carry facts into the state, queries read it. Every payload is
 * checked first, and a bad one refused whole and counted.
 */
export function registerHandlers(entity: EntityState): void {
  const { key } = entity;
  // A handler must never throw: a failed workflow task would stall the breaker for the whole fleet. The handler's
  // arguments are typed by the signal's definition (setHandler alone would infer any[]).
  const onSignal = <A extends unknown[]>(def: SignalDefinition<A>, fn: (...args: A) => void) =>
    setHandler(def, (...args: A) => {
      try {
        const c = checkSignal(def.name as CheckedSignal, args[0]);
        if (!c.ok) return entity.refused(def.name, c.problem);
        args[0] = c.value;
        fn(...args);
      } catch (err) {
        log.error('breaker signal rejected', {
          key,
          signal: def.name,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    });

  onSignal(reportSignal, (r) => onReport(entity, r));
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
  onSignal(adminSignal, (a: AdminAction) => onAdmin(entity, a));
  setHandler(viewQuery, () => entity.view());
  // A limit that is not a whole number of at least 0 reads the whole log.
  setHandler(transitionsQuery, (limit?: number) =>
    entity.history.slice(0, Number.isSafeInteger(limit) && limit! >= 0 ? limit : entity.history.length),
  );
  setHandler(probeDecisionQuery, (requestId: string) => entity.decision(requestId));
  setHandler(statusQuery, () => entity.status());
}

/** A report: counted, its reporter heard from, its outcomes applied to the policy. */
function onReport(entity: EntityState, r: OutcomeReport): void {
  const { key } = entity;
  entity.counters.reports++;
  if (
    r.generation !== undefined &&
    r.generation < entity.policy.lastGeneration &&
    stateName(entity.policy) !== 'closed'
  ) {
    entity.counters.lateReports = (entity.counters.lateReports ?? 0) + 1;
  }
  entity.lastReportAt = Date.now();
  const { everyMs } = r;
  if (r.reporter) entity.heardFrom(r.reporter, everyMs);
  // A worker's own tile URL, for an entity that has no self-probe and none an operator chose (or cleared).
  if (r.probe && entity.probeSpec === null && !entity.probeByOperator) {
    entity.probeSpec = r.probe;
    entity.wake = true;
    log.info('self-probe taken from a report', { key, url: r.probe.url, reporter: r.reporter });
  }
  if (r.stalled) entity.counters.stalled = (entity.counters.stalled ?? 0) + r.stalled;
  // Reports from guards that say what they have in flight: the sample floors follow the fleet's concurrency.
  const concurrency =
    typeof r.inFlight === 'number' && Number.isFinite(r.inFlight)
      ? entity.concurrency(r.reporter || 'anonymous', r.inFlight, everyMs)
      : undefined;
  const parts = splitReport(r);
  const out = entity.apply({
    type: 'report',
    reporter: r.reporter || 'anonymous',
    // The quorum's witness (a host): reports without one (older guards, recorded histories) count by reporter.
    ...(typeof r.witness === 'string' && r.witness ? { witness: r.witness } : {}),
    ...parts,
    ...(r.retryAfterMs ? { retryAfterMs: r.retryAfterMs } : {}),
    ...(r.rateLimitedForMs ? { rateLimitedForMs: r.rateLimitedForMs } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
  });
  // Named only on its own failing report: a healthy reporter's successes can arrive while the decline still holds.
  const failed = (r.counts?.transient ?? 0) + (r.counts?.['service-exception'] ?? 0);
  if (out.declined && failed > 0) entity.declined(r.reporter || 'anonymous', out.declined);
}

/** An operator's action: a self-probe spec, or a policy event recorded with who sent it. */
function onAdmin(entity: EntityState, a: AdminAction): void {
  const { key } = entity;
  if (a.action === 'set-probe') {
    entity.probeSpec = a.probe;
    entity.operatorSet = true;
    entity.probeByOperator = true;
    entity.wake = true;
    return;
  }
  const { event, origin } = adminCommand(a);
  const out = entity.apply(event, origin);
  if (out.ignored) log.warn('admin signal ignored', { key, action: a.action, why: out.ignored });
  // A configuration the policy cannot run is refused as a whole, as a payload that fails the checks is.
  if (out.ignored && a.action === 'configure') entity.refused('admin', out.ignored, false);
  else if (a.action === 'configure') entity.operatorSet = true;
}
