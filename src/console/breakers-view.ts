import type { Client } from '@temporalio/client';
import type { BreakerStateName, TransitionRecord } from '../breaker';
import { listBreakers, showBreaker } from '../client/breakers';
import { openReport } from '../client/open-intervals';

/** How far back the page's timeline and "time open" reach. */
export const TIMELINE_MS = 24 * 3600_000;

/** One transition as the page draws it: no figures beyond the ones a reader needs, never a probe's spec. */
export interface PageTransition {
  at: number;
  from: BreakerStateName;
  to: BreakerStateName;
  reason: string;
  detail: string;
  actor?: string;
  sender?: string;
  cooldownMs?: number;
}

export interface PageBreaker {
  key: string;
  state: BreakerStateName | null;
  running: boolean;
  /** The latest transition's reason and detail: why it is in its state. */
  reason: string | null;
  /** Time spent open (any not-closed blocking state) over the last 24 h, ms. */
  openMsLast24h: number;
  /** Reporters heard from lately (coarse, as the entity publishes them), when the entity counts them. */
  reporters: number | null;
  /** Probe tokens outstanding now: who holds each, since when. */
  probes: { holder: string; grantedAt: number; leaseUntil: number }[];
  counters: { reports: number; probeRequests: number; selfProbes: number } | null;
  cooldownUntil: number | null;
  /** Most recent first, within the last 24 h (and at least the last one). */
  transitions: PageTransition[];
}

/**
 * The breakers as the console shows them: every running entity, with its state, why, the time it spent open
 * in the last 24 h, its reporters, its probes and its transitions. Only fields chosen here reach the page:
 * an entity's configuration and self-probe spec (which may name a credential's variable) never do.
 */
export async function pageBreakers(client: Client, now: number): Promise<PageBreaker[]> {
  const listed = await listBreakers(client);
  const out: PageBreaker[] = [];
  for (const b of listed.breakers) {
    try {
      out.push(await pageBreaker(client, b.key, now));
    } catch {
      // Listed a moment ago and gone now (finished idle, terminated): the list shows what it saw.
      out.push({ key: b.key, state: b.state, running: false, reason: null, openMsLast24h: 0, reporters: null, probes: [], counters: null, cooldownUntil: null, transitions: [] });
    }
  }
  return out;
}

export async function pageBreaker(client: Client, key: string, now: number): Promise<PageBreaker> {
  const shown = await showBreaker(client, key);
  const since = now - TIMELINE_MS;
  const recent = shown.transitions.filter((t, i) => i === 0 || t.at >= since);
  const report = openReport(shown.transitions, since, now);
  const last = shown.transitions[0];
  const base = {
    key: shown.key,
    running: shown.running,
    reason: last ? `${last.reason}: ${last.detail}` : null,
    openMsLast24h: report.openMs,
    transitions: recent.map(pageTransition),
  };
  if (!shown.running) return { ...base, state: last?.to ?? null, reporters: null, probes: [], counters: null, cooldownUntil: null };
  const s = shown.status;
  return {
    ...base,
    state: s.view.state,
    reporters: s.view.reporters ?? s.view.fleet?.reporters ?? null,
    probes: s.probes.map((p) => ({ holder: p.holder, grantedAt: p.grantedAt, leaseUntil: p.leaseUntil })),
    counters: { reports: s.counters.reports, probeRequests: s.counters.probeRequests, selfProbes: s.counters.selfProbes },
    cooldownUntil: s.view.cooldownUntil,
  };
}

function pageTransition(t: TransitionRecord): PageTransition {
  return {
    at: t.at,
    from: t.from,
    to: t.to,
    reason: t.reason,
    detail: t.detail,
    ...(t.actor !== undefined ? { actor: t.actor } : {}),
    ...(t.sender ? { sender: `${t.sender.identity} as ${t.sender.user}@${t.sender.host}` } : {}),
    ...(t.cooldownMs !== undefined ? { cooldownMs: t.cooldownMs } : {}),
  };
}
