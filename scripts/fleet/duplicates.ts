/** The soak's duplicates by the fault that caused them. */

export type FaultKind = 'kill' | 'temporal' | 's3' | 'tiles';

export interface FaultWindow {
  kind: FaultKind;
  startedAt: number;
  endedAt: number;
}

/** How far from a fault a tile's first serve is still laid at its door: a checkpoint's second, a retry's start. */
export const NEAR_MS = 2_000;

/**
 * Each tile served more than once, counted against the fault whose window (NEAR_MS either side) held its
 * first serve (the latest to start, where windows overlap), or `none`: a request made twice with no fault
 * about is a defect of its own.
 */
export function duplicatesByFault(
  serves: ReadonlyMap<string, readonly number[]>,
  faults: readonly FaultWindow[],
): Record<FaultKind | 'none', number> {
  const out: Record<FaultKind | 'none', number> = { kill: 0, temporal: 0, s3: 0, tiles: 0, none: 0 };
  for (const times of serves.values()) {
    if (times.length < 2) continue;
    const first = times[0]!;
    let cause: FaultWindow | null = null;
    for (const f of faults) {
      if (first >= f.startedAt - NEAR_MS && first <= f.endedAt + NEAR_MS && (!cause || f.startedAt > cause.startedAt))
        cause = f;
    }
    out[cause?.kind ?? 'none']++;
  }
  return out;
}
