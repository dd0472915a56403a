import type { BreakerStateName, TransitionReason, TransitionRecord } from '../breaker';

/** States in which the breaker stops the fleet's traffic (half-open lets one probe through). */
const NOT_CLOSED: ReadonlySet<BreakerStateName> = new Set(['open', 'half-open', 'forced-open']);
const OPEN: ReadonlySet<BreakerStateName> = new Set(['open', 'forced-open']);

export interface OpenInterval {
  /** When the breaker left closed (epoch ms); the window's start when it was already open then. */
  from: number;
  /** When it closed again; null while it is still not closed. */
  to: number | null;
  /** Why it opened: the reason of the transition that left closed (null when that is before the log starts). */
  reason: TransitionReason | null;
  /** Time in open or forced-open within the window (ms): the rest of the interval was half-open probing. */
  openMs: number;
  /** Length within the window (ms), to `now` while still not closed. */
  ms: number;
  /** Failed probes that sent it back to open during the interval. */
  reopens: number;
}

export interface OpenReport {
  since: number;
  now: number;
  /** Time open or forced-open within the window (ms): traffic stopped entirely. */
  openMs: number;
  /** Time not closed (open, half-open, forced-open) within the window (ms). */
  notClosedMs: number;
  intervals: OpenInterval[];
  /** The oldest transition the log holds (epoch ms); null for an empty log. */
  logStartsAt: number | null;
  /** The window starts before the log does (unless the log is known complete): before logStartsAt, the state is inferred. */
  truncated: boolean;
}

/**
 * "How long was it open last night?" from a transition log (most recent first, as the entity keeps it):
 * every interval in [since, now] during which the breaker was not closed, with the reason it opened and the
 * time spent fully open. `logComplete`: the log goes back to the entity's first transition (nothing trimmed).
 */
export function openReport(
  log: readonly TransitionRecord[],
  since: number,
  now: number,
  logComplete = false,
): OpenReport {
  const ordered = [...log].sort((a, b) => a.at - b.at);
  const first = ordered[0];
  // The state at `since`: the `to` of the last transition before it, else the `from` of the first after it.
  const before = ordered.filter((t) => t.at <= since).at(-1);
  let state: BreakerStateName = before ? before.to : (first?.from ?? 'closed');
  let stateAt = since;
  const intervals: OpenInterval[] = [];
  // Already not closed at `since`: the reason is that of the last transition out of closed before it.
  const opened = ordered.filter((t) => t.at <= since && !NOT_CLOSED.has(t.from) && NOT_CLOSED.has(t.to)).at(-1);
  let current: OpenInterval | null = NOT_CLOSED.has(state)
    ? { from: since, to: null, reason: opened?.reason ?? null, openMs: 0, ms: 0, reopens: 0 }
    : null;
  const advance = (until: number) => {
    if (current && OPEN.has(state)) current.openMs += Math.max(0, until - stateAt);
    stateAt = until;
  };
  for (const t of ordered) {
    if (t.at <= since || t.at > now) continue;
    advance(t.at);
    if (!current && NOT_CLOSED.has(t.to))
      current = { from: t.at, to: null, reason: t.reason, openMs: 0, ms: 0, reopens: 0 };
    else if (current && t.from === 'half-open' && t.to === 'open') current.reopens++;
    if (current && !NOT_CLOSED.has(t.to)) {
      current.to = t.at;
      current.ms = t.at - current.from;
      intervals.push(current);
      current = null;
    }
    state = t.to;
  }
  advance(now);
  if (current) {
    current.ms = now - current.from;
    intervals.push(current);
  }
  const truncated = !logComplete && first !== undefined && first.at > since;
  return {
    since,
    now,
    openMs: intervals.reduce((s, i) => s + i.openMs, 0),
    notClosedMs: intervals.reduce((s, i) => s + i.ms, 0),
    intervals,
    logStartsAt: first?.at ?? null,
    truncated,
  };
}
