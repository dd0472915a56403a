/**
 * Durations as the CLI and requests write them. Apart from the request schema, so a command that only takes
 * a duration (`breaker open --for`) does not load the request's validation.
 */

export const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A duration as the CLI and requests write it, one or more numbers with units: `90m`, `2h`, `1h30m`, `45s`,
 * `1.5d`, `500ms`. Its length in ms, or null when `text` is not one.
 */
export function durationMs(text: string): number | null {
  const t = text.trim().toLowerCase();
  const parts = [...t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (!parts.length || parts.map((p) => p[0]).join('') !== t) return null;
  return Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2] as keyof typeof UNIT_MS], 0));
}
