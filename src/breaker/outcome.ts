/**
 * The pipeline's outcome kinds (ARCHITECTURE.md, "Outcome classification"). Transient and service-exception
 * count as failures; permanent is counted apart (a surge can trip); neutral and rate-limited count as
 * neither. These are the kinds a report counts and the window holds (in this order: the carried window's rows
 * depend on it).
 */
export const OUTCOME_KINDS = [
  'success',
  'transient',
  'service-exception',
  'permanent',
  'neutral',
  'rate-limited',
] as const;
export type CountedKind = (typeof OUTCOME_KINDS)[number];

/**
 * `local`: the call failed in the worker itself (its resolver, its sockets, its egress proxy) and never reached
 * the endpoint. It says nothing about the endpoint's health, so it is never reported to the breaker; it counts
 * toward the worker's own quarantine (src/activities/guard/quarantine.ts).
 */
export type OutcomeKind = CountedKind | 'local';
export const ALL_OUTCOME_KINDS: readonly OutcomeKind[] = [...OUTCOME_KINDS, 'local'];

export function isFailure(kind: OutcomeKind): boolean {
  return kind === 'transient' || kind === 'service-exception';
}

/** Counts per counted outcome kind, as a worker reports them for one interval. */
export type OutcomeCounts = Record<CountedKind, number>;

export function zeroCounts(): OutcomeCounts {
  return { success: 0, transient: 0, 'service-exception': 0, permanent: 0, neutral: 0, 'rate-limited': 0 };
}
