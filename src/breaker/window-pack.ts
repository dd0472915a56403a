/**
 * The rolling window in a compact form for carrying across continue-as-new, at most `budget` characters of
 * JSON whatever the configuration. A bucket is one row of numbers: its slot (start / bucketMs, from the first
 * row's), the six outcome counts, then its latency histogram as the index of the first used counter and the
 * counters up to the last used one (a fleet's latencies sit in a few neighbouring counters).
 *
 * A window too large for the budget (600 busy buckets of wide histograms) is coarsened: older buckets are merged
 * in groups, the fast window's buckets kept whole as long as that is enough. A merged bucket takes the start of
 * its newest member, so nothing leaves the window at the carry: the figures right after it are the figures
 * right before, and merged outcomes leave the window up to a group's width later than they would have.
 *
 * With a quorum, the buckets' reporter sets (quorum.ts: at most `quorum` hashes each) go in `who`, one entry per
 * bucket that has any; merged buckets merge their sets (capped), so the carry stays within the same budget.
 */
import type { PolicyConfig } from './config';
import { addInto, emptyHistogram } from './latency';
import { OUTCOME_KINDS, zeroCounts } from './outcome';
import { unionCapped } from './quorum';
import type { RollingWindow, WindowBucket } from './window';

export interface PackedWindow {
  /** The first row's slot; each row's first number is its slot after this one. */
  base: number;
  bucketMs: number;
  rows: number[][];
  /** With a quorum: [row index, seen hashes, failing hashes, slow hashes] for each bucket that has reporters (no slow: none). */
  who?: [row: number, seen: number[], failing: number[], slow?: number[]][];
}

type PackConfig = Pick<PolicyConfig, 'bucketMs' | 'fastWindowMs'> & { quorum?: number };

/** Packs `window` (ascending starts, as the policy keeps it) into at most `budget` characters of JSON. */
export function packWindow(window: RollingWindow, config: PackConfig, now: number, budget: number): PackedWindow {
  const cap = config.quorum ?? 1;
  let packed = pack(window, config.bucketMs);
  // Keep the fast window's buckets whole while merging the older ones in ever larger groups is enough; then
  // merge across the whole window.
  // (A state carried from before the fast window has none: then the whole window may be merged.)
  const fastFrom = Number.isFinite(config.fastWindowMs) ? now - config.fastWindowMs : Number.POSITIVE_INFINITY;
  for (const keepFrom of [fastFrom, Number.POSITIVE_INFINITY]) {
    for (let group = 2; size(packed) > budget && group <= 2 * window.length; group *= 2) {
      packed = pack(coarsen(window, config.bucketMs, group, keepFrom, cap), config.bucketMs);
    }
  }
  if (size(packed) > budget)
    packed = pack(
      coarsen(window, config.bucketMs, Number.MAX_SAFE_INTEGER, Number.POSITIVE_INFINITY, cap),
      config.bucketMs,
    );
  return packed;
}

/** The window a packed one holds. */
export function unpackWindow(p: PackedWindow): RollingWindow {
  const who = new Map((p.who ?? []).map(([row, seen, failing, slow]) => [row, { seen, failing, slow }]));
  return p.rows.map((row, index) => {
    const counts = zeroCounts();
    OUTCOME_KINDS.forEach((kind, i) => (counts[kind] = row[1 + i] ?? 0));
    const latency = emptyHistogram();
    const first = row[7];
    if (first !== undefined)
      for (let i = 8; i < row.length && first + i - 8 < latency.length; i++) latency[first + i - 8] = row[i]!;
    const sets = who.get(index);
    return {
      start: (p.base + row[0]!) * p.bucketMs,
      counts,
      latency,
      ...(sets?.seen.length ? { seen: sets.seen } : {}),
      ...(sets?.failing.length ? { failing: sets.failing } : {}),
      ...(sets?.slow?.length ? { slow: sets.slow } : {}),
    };
  });
}

function pack(window: RollingWindow, bucketMs: number): PackedWindow {
  const base = window.length ? Math.floor(window[0]!.start / bucketMs) : 0;
  const rows = window.map((b) => {
    const row = [Math.floor(b.start / bucketMs) - base, ...OUTCOME_KINDS.map((k) => b.counts[k])];
    const first = b.latency.findIndex((c) => c !== 0);
    if (first >= 0) {
      let last = b.latency.length - 1;
      while (b.latency[last] === 0) last--;
      row.push(first, ...b.latency.slice(first, last + 1));
    }
    return row;
  });
  const who = window.flatMap((b, i): [number, number[], number[], number[]?][] =>
    b.seen?.length || b.failing?.length || b.slow?.length
      ? [b.slow?.length ? [i, b.seen ?? [], b.failing ?? [], b.slow] : [i, b.seen ?? [], b.failing ?? []]]
      : [],
  );
  return { base, bucketMs, rows, ...(who.length ? { who } : {}) };
}

/** Buckets older than `keepFrom` merged by groups of `group` slots, each into its newest member's start. */
function coarsen(window: RollingWindow, bucketMs: number, group: number, keepFrom: number, cap: number): RollingWindow {
  const out: WindowBucket[] = [];
  let groupOf: number | null = null;
  for (const b of window) {
    const g = b.start < keepFrom ? Math.floor(b.start / bucketMs / group) : null;
    const last = out[out.length - 1];
    if (g !== null && g === groupOf && last) {
      for (const kind of OUTCOME_KINDS) last.counts[kind] += b.counts[kind];
      addInto(last.latency, b.latency);
      last.start = b.start;
      const seen = unionCapped(last.seen, b.seen, cap);
      const failing = unionCapped(last.failing, b.failing, cap);
      if (seen) last.seen = seen;
      if (failing) last.failing = failing;
      const slow = unionCapped(last.slow, b.slow, cap);
      if (slow) last.slow = slow;
    } else {
      out.push({
        start: b.start,
        counts: { ...b.counts },
        latency: [...b.latency],
        ...(b.seen ? { seen: [...b.seen] } : {}),
        ...(b.failing ? { failing: [...b.failing] } : {}),
        ...(b.slow ? { slow: [...b.slow] } : {}),
      });
    }
    groupOf = g;
  }
  return out;
}

function size(p: PackedWindow): number {
  return JSON.stringify(p).length;
}
