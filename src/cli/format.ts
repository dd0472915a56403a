import type { TransitionRecord } from '../breaker';

/** One line per transition: offset, from -> to, reason, detail. */
export function formatTransitions(transitions: readonly TransitionRecord[], since: number): string {
  if (transitions.length === 0) return '  (no transitions)';
  return transitions
    .map((t) => {
      const offset = `+${((t.at - since) / 1000).toFixed(3)}s`.padStart(10);
      const move = `${t.from} -> ${t.to}${t.shadow ? ' (shadow)' : ''}`.padEnd(24);
      const cooldown = t.cooldownMs !== undefined ? ` [cooldown ${t.cooldownMs} ms]` : '';
      return `  ${offset}  ${move} ${t.reason}: ${t.detail}${cooldown}`;
    })
    .join('\n');
}

/**
 * A list command's --json (`mosaic list`, `breaker list`, `schedule list`): one object, never a bare array,
 * `{ "items": [...], "count": N, ...extra }`: what the list says besides its rows (the query, whether it
 * stopped at its limit) goes beside them. docs/cli.md.
 */
export function listJson(items: readonly unknown[], extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ items, count: items.length, ...extra }, null, 2);
}
