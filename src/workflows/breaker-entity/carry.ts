/**
 * What continue-as-new carries, and how a new run reads it back: everything the next run needs, in at most
 * CARRY_BUDGET bytes of JSON whatever the configuration (Temporal warns at 512 KB a payload, and a large input
 * is decoded again on every replay of the run). Pure: no workflow API, so tests measure it directly.
 *
 * - the transition log: the newest LOG_FULL transitions as recorded (figures, detail, who), and brief records
 *   (when, from, to, why, the cooldown) of the older ones up to LOG_CARRIED in all: enough for "each open
 *   interval and its reason" over a day of flapping, without every trip's figures;
 * - the policy state, its window packed (window-pack.ts: sparse latency, older buckets merged if need be);
 * - the newest DECISIONS_CARRIED probe decisions (a requester reads its own within seconds; a grant whose token
 *   is still out is answered from the policy's tokens, which are carried whole, however old it is);
 * - the reporters heard from lately and what they had in flight, the newest FLEET_CARRIED of each;
 * - the counters and the rest, as they are.
 *
 * `restore` reads what any release carried: this form, or the whole one of early 0.x runs (the whole log with
 * its figures, the window as it is), with a policy state of any version (migrate.ts).
 */
import {
  migratePolicyState,
  packWindow,
  unpackWindow,
  type PolicyState,
  type ProbeDecision,
  type TransitionRecord,
} from '../../breaker';
import type { BriefTransition, CarriedState, EntityCounters } from '../../messages/breaker';

/** The carried payload's bound, in bytes of JSON (Temporal's JSON payloads are that, as UTF-8). */
export const CARRY_BUDGET = 62_000;
/** Transitions carried in all (`breaker show --since 24h` reads open intervals from them) ... */
export const LOG_CARRIED = 250;
/** ... and never fewer, whatever else must be cut to fit. */
export const LOG_MIN = 200;
/** Of those, the newest carried whole. */
export const LOG_FULL = 10;
export const DECISIONS_CARRIED = 16;
export const FLEET_CARRIED = 64;
/** The packed window's share of the budget (it gets less when the rest does not fit). */
const WINDOW_BUDGET = 14_000;
/** Text fields of a carried transition are cut to this (an operator's reason, a claimed actor). */
const TEXT_MAX = 200;
/** A carried decision or fleet entry longer than this (an absurd id) is left behind rather than cut. */
const ENTRY_MAX = 400;

/** What a run holds that the next one needs (EntityState's fields). */
export interface CarryParts {
  policy: PolicyState;
  /** Most recent first. */
  log: readonly TransitionRecord[];
  lastReportAt: number;
  lastTransitionAt: number;
  /** Oldest first. */
  decisions: readonly [string, ProbeDecision][];
  counters: EntityCounters;
  searchAttributesOn: boolean;
  reporters: readonly [string, number][];
  inFlight: readonly [string, number, number][];
  operatorSet: boolean;
  probeByOperator?: boolean;
}

/** The carried state for `parts` at workflow time `now`, at most CARRY_BUDGET bytes of JSON. */
export function carry(parts: CarryParts, now: number): CarriedState {
  // Each pass halves what may be cut (not the LOG_MIN transitions): the first fits all but the largest states
  // (a hundred probe tokens out, with long ids, and a window of 600 wide buckets).
  let scale = 1;
  let out = build(parts, now, scale);
  while (bytes(out) > CARRY_BUDGET && scale > 1 / 64) out = build(parts, now, (scale /= 2));
  return out;
}

/** The parts a carried state holds, in either format, brought to this release's shapes. */
export function restore(c: CarriedState): CarryParts {
  const policy = migratePolicyState(c.window ? { ...c.policy, window: unpackWindow(c.window) } : c.policy);
  let at = 0;
  const brief = (c.brief ?? []).map(([back, from, to, reason, cooldownMs, shadow], i): TransitionRecord => {
    at = i === 0 ? back : at - back;
    return {
      at,
      from,
      to,
      reason,
      detail: '',
      ...(typeof cooldownMs === 'number' ? { cooldownMs } : {}),
      ...(shadow ? { shadow: true } : {}),
    };
  });
  return {
    policy,
    log: [...c.log, ...brief],
    lastReportAt: c.lastReportAt,
    lastTransitionAt: c.lastTransitionAt ?? 0,
    decisions: c.decisions ?? [],
    counters: c.counters,
    searchAttributesOn: c.searchAttributesOn ?? false,
    reporters: c.reporters ?? [],
    inFlight: c.inFlight ?? [],
    operatorSet: c.operatorSet ?? false,
    probeByOperator: c.probeByOperator ?? false,
  };
}

function build(p: CarryParts, now: number, scale: number): CarriedState {
  const n = (x: number) => Math.max(1, Math.floor(x * scale));
  const full = p.log.slice(0, n(LOG_FULL)).map(trimmed);
  const brief = p.log
    .slice(full.length, Math.max(LOG_MIN, n(LOG_CARRIED)))
    .map((t, i, rows) => briefOf(t, i === 0 ? null : rows[i - 1]!.at));
  const newest = <T extends readonly unknown[]>(rows: readonly T[], at: (r: T) => number) =>
    rows
      .filter((r) => JSON.stringify(r).length <= ENTRY_MAX)
      .sort((a, b) => at(b) - at(a))
      .slice(0, n(FLEET_CARRIED));
  const decisions = p.decisions.filter((d) => JSON.stringify(d).length <= ENTRY_MAX).slice(-n(DECISIONS_CARRIED));
  const reporters = newest(p.reporters, (r) => r[1]);
  const inFlight = newest(p.inFlight, (r) => r[1]);
  return {
    policy: { ...p.policy, window: [] },
    window: packWindow(p.policy.window, p.policy.config, now, Math.floor(WINDOW_BUDGET * scale)),
    log: full,
    ...(brief.length ? { brief } : {}),
    lastReportAt: p.lastReportAt,
    lastTransitionAt: p.lastTransitionAt,
    decisions,
    counters: p.counters,
    searchAttributesOn: p.searchAttributesOn,
    ...(reporters.length ? { reporters } : {}),
    ...(inFlight.length ? { inFlight } : {}),
    ...(p.operatorSet ? { operatorSet: true } : {}),
    ...(p.probeByOperator ? { probeByOperator: true } : {}),
  };
}

/** A transition carried whole, its free text cut to TEXT_MAX. */
function trimmed(t: TransitionRecord): TransitionRecord {
  const cut = (s: string) => (s.length > TEXT_MAX ? `${s.slice(0, TEXT_MAX - 1)}…` : s);
  return {
    ...t,
    detail: cut(t.detail),
    ...(t.actor !== undefined ? { actor: cut(t.actor) } : {}),
    ...(t.sender
      ? { sender: { identity: cut(t.sender.identity), user: cut(t.sender.user), host: cut(t.sender.host) } }
      : {}),
  };
}

/** A transition in brief; its time as the step back from the previous (newer) one's, when there is one. */
function briefOf(t: TransitionRecord, newerAt: number | null): BriefTransition {
  const row: BriefTransition = [newerAt === null ? t.at : newerAt - t.at, t.from, t.to, t.reason, t.cooldownMs ?? null];
  // A shadow transition (metrics-only) blocked nothing: it must not read as a real open later.
  if (t.shadow) row.push(1);
  return row;
}

/** Bytes of `c` as JSON in UTF-8, as the default payload converter writes it. */
export function bytes(c: CarriedState): number {
  const text = JSON.stringify(c);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // A surrogate pair is 4 bytes, 2 per half.
    n += code < 0x80 ? 1 : code < 0x800 || (code >= 0xd800 && code <= 0xdfff) ? 2 : 3;
  }
  return n;
}
