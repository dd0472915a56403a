// The breaker commands' human-readable output (their --json prints the objects themselves).
import { pausedForMs, type TransitionRecord } from '../../breaker';
import type { OpenReport } from '../../client/open-intervals';
import type { AdminResult, ListResult, ListedBreaker, ShownBreaker } from '../../client/breakers';

/** A time as ISO 8601; a stored value that is no valid time prints as such rather than failing the whole listing. */
export const iso = (t: number | Date | null | undefined): string => {
  if (t === null || t === undefined) return '-';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? `(invalid time: ${String(t).slice(0, 40)})` : d.toISOString();
};

/** 65_000 -> "1m 05s"; 1_500 -> "1.5s"; 250 -> "250ms". */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const s = Math.round(ms / 1_000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3_600);
  const m = Math.floor((s % 3_600) / 60);
  const sec = s % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${String(m).padStart(2, '0')}m`;
  return `${m}m ${String(sec).padStart(2, '0')}s`;
}

/** "2025-01-01T00:00:03.000Z (in 25s)" / "(3s ago)". */
function when(t: number, now: number): string {
  const d = t - now;
  return `${iso(t)} (${d >= 0 ? `in ${formatDuration(d)}` : `${formatDuration(-d)} ago`})`;
}

/** What a forced-closed breaker means, wherever its state is shown: it lets every call through and never trips. */
export const FORCED_CLOSED = 'never trips until `breaker reset` or `breaker close`';

function listDetail(b: ListedBreaker, now: number): string {
  const v = b.view;
  if (!v) return b.state === null ? 'starting (no state published yet)' : '';
  switch (v.state) {
    case 'open':
      return v.cooldownUntil !== null ? `cooldown ends ${when(v.cooldownUntil, now)}` : 'cooling down';
    case 'forced-open':
      return v.forcedUntil !== null
        ? `forced open until ${when(v.forcedUntil, now)}`
        : 'forced open until closed or reset';
    case 'half-open':
      return `probes ${v.probesOutstanding}/${v.maxConcurrentProbes} out (generation ${v.generation})`;
    case 'closed':
      if (pausedForMs(v, now) > 0) return `paced (Retry-After) until ${when(v.pacedUntil!, now)}`;
      return v.rampStartedAt !== null && v.rampStartedAt + v.rampMs > now
        ? `ramping up since ${iso(v.rampStartedAt)}`
        : '';
    case 'forced-closed':
      return `forced closed: ${FORCED_CLOSED}`;
    case 'metrics-only':
      return 'metrics only: never blocks';
  }
}

export function formatList(result: ListResult, state: string | undefined, now: number): string {
  const { breakers } = result;
  if (!breakers.length) {
    return state
      ? `no running breakers in state ${state}`
      : 'no running breakers (an entity starts with the first outcome a guard reports for its key)';
  }
  const rows = breakers.map((b) => [
    `${b.state ?? 'unknown'}${b.stateFrom === 'memo' ? '*' : ''}`,
    b.key,
    listDetail(b, now),
  ]);
  const header = ['STATE', 'KEY', 'DETAIL'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]!) : c))
      .join('  ')
      .trimEnd();
  const lines = [line(header), ...rows.map(line)];
  lines.push(
    '',
    `${breakers.length} running breaker${breakers.length === 1 ? '' : 's'}${state ? ` in state ${state}` : ''}`,
  );
  if (breakers.some((b) => b.stateFrom === 'memo'))
    lines.push("* state from the entity's memo: its BreakerState search attribute is not set");
  if (result.filteredBy === 'memo')
    lines.push("(BreakerState is not registered in this namespace: filtered by the entities' memo)");
  return lines.join('\n');
}

export function formatTransitionLog(transitions: readonly TransitionRecord[]): string[] {
  if (!transitions.length) return ['  (no transitions)'];
  const moves = transitions.map((t) => `${t.from} -> ${t.to}${t.shadow ? ' (shadow)' : ''}`);
  const width = Math.max(...moves.map((m) => m.length));
  return transitions.map((t, i) => {
    const cooldown = t.cooldownMs !== undefined ? ` [cooldown ${formatDuration(t.cooldownMs)}]` : '';
    return `  ${iso(t.at)}  ${moves[i]!.padEnd(width)}  ${t.reason}: ${t.detail}${cooldown}`;
  });
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

export function formatShow(shown: ShownBreaker, now: number): string {
  const lines = [
    `breaker ${shown.key}`,
    `  workflow     ${shown.workflowId} (run ${shown.runId}, task queue ${shown.taskQueue}, started ${iso(shown.startTime)})`,
  ];
  if (!shown.running) {
    lines.push(
      `  state        not running: ${shown.executionStatus}${shown.closeTime ? ` at ${iso(shown.closeTime)}` : ''}` +
        (shown.executionStatus === 'COMPLETED' ? ' (finished idle and closed; the next report starts it again)' : ''),
    );
    lines.push(
      '',
      `transitions of that run, most recent first (${shown.transitions.length}):`,
      ...formatTransitionLog(shown.transitions),
    );
    return lines.join('\n');
  }
  const s = shown.status;
  const v = s.view;
  let state: string = v.state;
  if (v.state === 'open' && v.cooldownUntil !== null) state += `, cooldown ends ${when(v.cooldownUntil, now)}`;
  if (v.state === 'forced-open')
    state += v.forcedUntil !== null ? ` until ${when(v.forcedUntil, now)}` : ' until closed or reset';
  if (v.state === 'forced-closed') state += `: ${FORCED_CLOSED}`;
  if (v.mode === 'metrics-only') state += ` (phase ${v.phase} in the shadow)`;
  // A 429's Retry-After: the fleet holds its calls, though the breaker lets them through.
  if (pausedForMs(v, now) > 0) state += `, paced (Retry-After) until ${when(v.pacedUntil!, now)}`;
  const p = shown.permitNow;
  const permit = p.allow
    ? `allow${p.allowance < 1 ? `, allowance ${pct(p.allowance)} of normal concurrency (ramp)` : ''}`
    : p.probeRequired
      ? `probe token holders only (${v.probesOutstanding}/${v.maxConcurrentProbes} out)`
      : `refuse${p.retryAfterMs !== null ? `, retry after ${formatDuration(p.retryAfterMs)}` : ' until closed or reset'}`;
  const f = s.figures;
  const c = s.config;
  const counters = s.counters;
  lines.push(
    `  state        ${state}`,
    `  permit       ${permit}`,
    `  window       n ${f.n}: ${f.successes} ok, ${f.failures} failed (${pct(f.failureRatio)}; ${f.transient} transient, ${f.serviceException} service-exception); ` +
      `${f.permanent} permanent, ${f.neutral} neutral, ${f.rateLimited} rate-limited; p95 ${f.p95Ms === null ? '-' : `${Math.round(f.p95Ms)} ms`} (${f.latencySamples} latency samples)`,
    `  opened at    ${iso(s.openedAt)}, consecutive opens ${s.consecutiveOpens}${s.failedTrials ? `, failed trials in a row ${s.failedTrials}` : ''}`,
    `  probes       ${s.probes.length ? s.probes.map((t) => `generation ${t.generation} held by ${t.holder}, lease until ${iso(t.leaseUntil)}`).join('; ') : 'none out'}` +
      `${s.probeSuccesses ? `; ${s.probeSuccesses} successful${c.probeTrials ? '' : ' in a row'}` : ''}${s.probeFailures ? `; ${s.probeFailures} failed this round` : ''}`,
    `  self-probe   ${s.probe ? s.probe.url + (s.probe.source ? ` (headers and credentials of source ${JSON.stringify(s.probe.source.name)} in ${s.probe.source.file})` : '') : 'none configured'}`,
    `  config       window ${formatDuration(c.windowMs)}, min ${c.minSamples} samples, trip at ${pct(c.failureRatio)} failing, cooldown ${formatDuration(c.cooldownMs)} ` +
      `(x${c.cooldownMultiplier} ${flapText(c)}, cap x${c.cooldownMaxFactor}), ${c.probesToClose}${c.probeTrials ? ` of ${c.probeTrials}` : ''} probes to close${c.probeBackoff && c.probeBackoff > 1 && c.probeIntervalMs ? `, failed trials wait ${formatDuration(c.probeIntervalMs)} x${c.probeBackoff} each (cap x${c.cooldownMaxFactor})` : ''}, ramp ${formatDuration(c.rampMs)}`,
    `  counters     ${count(counters.reports, 'report')}${counters.lateReports ? ` (${counters.lateReports} late)` : ''}, ${count(counters.probeRequests, 'probe request')}, ` +
      `${count(counters.selfProbes, 'self-probe')}, ${count(counters.ignoredResults, 'ignored probe result')}, ${count(counters.refusedSignals ?? 0, 'refused signal')}, ` +
      `${counters.continuedAsNew} continue-as-new`,
    `  last report  ${iso(s.lastReportAt)}`,
    ...(s.loneFailers !== undefined
      ? [
          `  quorum       ${c.quorum ?? 1} failing reporters needed; ${count(counters.quorumDeclined ?? 0, 'trip')} declined (quorum not met); failing alone: ` +
            (s.loneFailers.length
              ? s.loneFailers.map((l) => `${l.reporter} (${l.count}x, last ${iso(l.at)})`).join(', ')
              : 'none'),
        ]
      : []),
    `  search attrs ${s.searchAttributes === null ? 'not checked yet' : s.searchAttributes ? 'BreakerState / BreakerKey kept current' : 'not kept (not registered in this namespace)'}`,
    `  as of        ${iso(s.asOf)} (the entity's last activity; history ${s.historyLength} events)`,
    '',
    `transitions, most recent first (${shown.transitions.length}):`,
    ...formatTransitionLog(shown.transitions),
  );
  return lines.join('\n');
}

/** The --since part of `breaker show`: time open over the period, then one line per interval. */
export function formatOpenReport(r: OpenReport, periodMs: number): string {
  const lines = [
    `over the last ${formatDuration(periodMs)} (since ${iso(r.since)}): open ${formatDuration(r.openMs)}, not closed ${formatDuration(r.notClosedMs)} ` +
      `(open, half-open or forced open) in ${count(r.intervals.length, 'interval')}`,
  ];
  // The entity keeps a bounded log (and a run that ended idle starts the next with none).
  if (r.truncated)
    lines.push(`  (the log starts at ${iso(r.logStartsAt)}: before that the state is taken from its first transition)`);
  for (const i of r.intervals) {
    const span = `${iso(i.from)} -> ${i.to === null ? 'now (still not closed)' : iso(i.to)}`;
    const reopens = i.reopens ? `, ${count(i.reopens, 'failed probe')}` : '';
    lines.push(
      `  ${span}  ${formatDuration(i.ms)}  ${i.reason ?? 'opened before the period'} (open ${formatDuration(i.openMs)}${reopens})`,
    );
  }
  return lines.join('\n');
}

/** An admin command's result; `command` is the command typed (`close` sends a reset), by default the action. */
export function formatAdmin(r: AdminResult, now: number, command: string = r.action): string {
  const v = r.status.view;
  let state: string = v.state;
  if (v.state === 'forced-open')
    state += v.forcedUntil !== null ? ` until ${when(v.forcedUntil, now)}` : ' until closed or reset';
  if (v.state === 'forced-closed') state += `: ${FORCED_CLOSED}`;
  if (v.state === 'closed' && v.mode === 'auto') state += ' (automatic: trips again on failures)';
  const lines = [
    `breaker ${r.key}: ${command}${command !== r.action ? ` (${r.action})` : ''} ${r.confirmed ? 'done' : 'sent, NOT YET CONFIRMED'}; state now ${state}`,
  ];
  if (r.transition) lines.push(...formatTransitionLog([r.transition]));
  else if (r.confirmed) lines.push(`  (it was already ${v.state}: no transition recorded)`);
  return lines.join('\n');
}

/** How the cooldown grows: per trip soon after a close (one incident is one open), or per open (entities before it). */
function flapText(c: { flapWindowMs?: number | null }): string {
  return c.flapWindowMs ? `per trip within ${formatDuration(c.flapWindowMs)} of a close` : 'per consecutive open';
}
