/**
 * The pipeline's outcome kinds (ARCHITECTURE.md, "Outcome classification"). Transient and service-exception
 * count as failures; permanent is counted apart (a surge can trip); neutral and rate-limited count as
 * neither.
 */
export const OUTCOME_KINDS = ['success', 'transient', 'service-exception', 'permanent', 'neutral', 'rate-limited'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

export function isFailure(kind: OutcomeKind): boolean {
  return kind === 'transient' || kind === 'service-exception';
}

/** Counts per outcome kind, as a worker reports them for one interval. */
export type OutcomeCounts = Record<OutcomeKind, number>;

export function zeroCounts(): OutcomeCounts {
  return { success: 0, transient: 0, 'service-exception': 0, permanent: 0, neutral: 0, 'rate-limited': 0 };
}
