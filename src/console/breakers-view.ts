import type { Client } from '@temporalio/client';
import type { BreakerStateName, TransitionRecord } from '../breaker';
import { BreakerNotFoundError, BreakerNotRunningError, listBreakers, showBreaker } from '../client/breakers';
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
  /** The entity did not answer its queries (no worker polling its task queue?): the state is its memo's. */
  notAnswering?: true;
  /** The latest transition's reason and detail: why it is in its state. */
  reason: string | null;
  /** Time spent open (any not-closed blocking state) over the last 24 h, ms. */
  openMsLast24h: number;
  /** Reporters heard from lately (coarse, as the entity publishes them), when the entity counts them. */
  reporters: number | null;
  /** Probe tokens outstanding now: who holds each, since when. */
  probes: { holder: string; grantedAt: number; leaseUntil: number }[];
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
  const out: PageBreaker[] = new Array<PageBreaker>(listed.breakers.length);
  // A few at a time: each is a describe and two queries, which the fleet's workers answer.
  let next = 0;
  const lane = async () => {
    for (let k = next++; k < listed.breakers.length; k = next++) {
      const b = listed.breakers[k]!;
      try {
        out[k] = await pageBreaker(client, b.key, now);
      } catch (err) {
        // Gone since it was listed (finished idle, terminated), or no worker answers its queries: the list's
        // state (from the search attribute or the memo) is what there is.
        const gone = err instanceof BreakerNotRunningError || err instanceof BreakerNotFoundError;
        out[k] = {
          key: b.key,
          state: b.state,
          ...(gone ? {} : { notAnswering: true as const }),
          reason: gone
            ? 'finished since it was listed'
            : 'its entity does not answer queries: is a worker polling its task queue?',
          openMsLast24h: 0,
          reporters: null,
          probes: [],
          transitions: [],
        };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(LANES, listed.breakers.length) }, lane));
  return out;
}

/** Breakers read at once for the overview. */
const LANES = 4;
/** Transitions read per breaker: enough for a day of a flapping endpoint, bounded whatever the entity keeps. */
const TRANSITIONS_READ = 500;

export async function pageBreaker(client: Client, key: string, now: number): Promise<PageBreaker> {
  const shown = await showBreaker(client, key, { limit: TRANSITIONS_READ });
  const since = now - TIMELINE_MS;
  const recent = shown.transitions.filter((t, i) => i === 0 || t.at >= since);
  const report = openReport(shown.transitions, since, now);
  const last = shown.transitions[0];
  const base = {
    key: shown.key,
    reason: last ? `${last.reason}: ${last.detail}` : null,
    openMsLast24h: report.openMs,
    transitions: recent.map(pageTransition),
  };
  if (!shown.running) return { ...base, state: last?.to ?? null, reporters: null, probes: [] };
  const s = shown.status;
  return {
    ...base,
    state: s.view.state,
    reporters: s.view.reporters ?? s.view.fleet?.reporters ?? null,
    probes: s.probes.map((p) => ({ holder: p.holder, grantedAt: p.grantedAt, leaseUntil: p.leaseUntil })),
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
