import type { TransitionRecord } from '../../src/breaker';
import { halfOpenIntervals } from './metrics';
import type { AttemptRecord, ServerStats } from './types';

/** One interval at a peak: what it was and where it sat relative to the outage's start. */
interface Member {
  side: 'client' | 'server';
  worker: number;
  probe: boolean;
  start: number;
  end: number;
  decision?: AttemptRecord['decision'];
  status?: number;
}

/** The instant of the highest overlap of `items` inside `windows` (the first such), and the items overlapping then. */
export function peakMembers<T>(
  items: readonly T[],
  span: (t: T) => readonly [number, number],
  windows: ReadonlyArray<readonly [number, number]>,
): { at: number; members: T[] } | null {
  let best: { at: number; members: T[] } | null = null;
  for (const [from, to] of windows) {
    if (!(to > from)) continue;
    const events: Array<[number, number, number]> = [];
    items.forEach((it, i) => {
      const [s, e] = span(it);
      const a = Math.max(s, from);
      const b = Math.min(e, to);
      if (b > a) events.push([a, 1, i], [b, -1, i]);
    });
    events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    const open = new Set<number>();
    for (const [t, d, i] of events) {
      if (d > 0) open.add(i);
      else open.delete(i);
      if (d > 0 && (!best || open.size > best.members.length))
        best = { at: t, members: [...open].map((j) => items[j]!) };
    }
  }
  return best;
}

/**
 * The intervals overlapping at each of the three half-open peaks (client, server, entity's own intervals), with
 * the entity's transitions around the peak: what `--debug` prints when a peak is above one.
 */
export function peakDump(args: {
  attempts: readonly AttemptRecord[];
  server: ServerStats;
  transitions: readonly TransitionRecord[];
  halfOpenWindow: [number, number] | null;
  runs?: ReadonlyArray<{ startedAt: number; firstTaskDoneAt: number | null }>;
}): string[] {
  const { attempts, server, transitions } = args;
  const O = server.schedule.outageAt;
  const endAt = server.schedule.endAt;
  const rel = (t: number) => `${t - O >= 0 ? '+' : ''}${((t - O) / 1000).toFixed(3)}`;
  const client: Member[] = attempts.map((a) => ({
    side: 'client',
    worker: a.worker,
    probe: a.probe,
    start: a.start,
    end: a.end,
    decision: a.decision,
    status: a.status,
  }));
  const serverSide: Member[] = server.requests.map((r) => ({
    side: 'server',
    worker: r[2],
    probe: r[2] < 0,
    start: r[0],
    end: Number.isNaN(r[1]) ? endAt : r[1],
  }));
  const entityHalfOpen = halfOpenIntervals([...transitions], endAt).filter(([a, b]) => b > O && a < endAt);
  const span = (m: Member) => [m.start, m.end] as const;
  const peaks: Array<[string, ReturnType<typeof peakMembers<Member>>]> = [
    ['client, fleet half-open window', args.halfOpenWindow ? peakMembers(client, span, [args.halfOpenWindow]) : null],
    [
      'server, fleet half-open window',
      args.halfOpenWindow ? peakMembers(serverSide, span, [args.halfOpenWindow]) : null,
    ],
    [
      "entity's half-open intervals",
      peakMembers([...client, ...serverSide.filter((m) => m.worker < 0)], span, entityHalfOpen),
    ],
  ];
  const runs = (args.runs ?? [])
    .map((r) => `${rel(r.startedAt)}/${r.firstTaskDoneAt === null ? '-' : rel(r.firstTaskDoneAt)}`)
    .join(', ');
  const out: string[] = [
    `entity runs (started/first task done): ${runs || 'n/a'}`,
    `peak dump (times in s from the outage's start; fleet half-open window ${args.halfOpenWindow ? args.halfOpenWindow.map(rel).join(' .. ') : 'none'})`,
  ];
  for (const [name, p] of peaks) {
    if (!p) {
      out.push(`  ${name}: none`);
      continue;
    }
    out.push(`  ${name}: ${p.members.length} at ${rel(p.at)}`);
    if (p.members.length < 2) continue;
    for (const m of p.members) {
      const d = m.decision
        ? ` decided ${rel(m.decision.at)} as ${m.decision.state}${m.decision.failOpen ? ' FAIL-OPEN' : ''}`
        : '';
      out.push(
        `    ${m.side} worker ${m.worker} ${m.probe ? 'PROBE' : 'ordinary'} ${rel(m.start)} .. ${rel(m.end)}${m.status !== undefined ? ` status ${m.status}` : ''}${d}`,
      );
    }
    for (const t of transitions.filter((t) => Math.abs(t.at - p.at) <= 3_000))
      out.push(`    entity ${rel(t.at)} ${t.from} -> ${t.to} (${t.reason}: ${t.detail})`);
    for (const r of (args.runs ?? []).filter((r) => Math.abs(r.startedAt - p.at) <= 3_000)) {
      out.push(
        `    entity run started ${rel(r.startedAt)} (continue-as-new), first task done ${r.firstTaskDoneAt === null ? 'never' : rel(r.firstTaskDoneAt)}`,
      );
    }
  }
  return out;
}
