import { now } from './clock';
import type { AttemptRecord, BreakerView, BreakerViewKind, ModeName } from './types';

/**
 * Measurement for one mode's run: every attempt (client-side) and every change in a worker's view of its
 * breaker. This is instrumentation only: the simulated workers never read it, so it shares no breaker state.
 */
export class ModeRecorder {
  readonly attempts: AttemptRecord[] = [];
  readonly views: BreakerView[] = [];
  private readonly lastView = new Map<number, BreakerViewKind>();
  /** Decisions/refusals counted per kind (not only changes), for the report. */
  readonly viewCounts: Record<BreakerViewKind, number> = {
    opened: 0,
    'half-open': 0,
    closed: 0,
    refused: 0,
    probe: 0,
    proceed: 0,
  };
  /** Guard or breaker errors (e.g. the guard failing open), counted and the first few kept. */
  readonly notes: string[] = [];
  errors = 0;
  /** Time each breaker decision took (guard.acquire in the shared mode), ms. */
  readonly decisionMs: number[] = [];

  constructor(readonly mode: ModeName) {}

  attemptStarted(): number {
    return now();
  }

  attemptFinished(): number {
    return now();
  }

  /** Records `kind` for `worker`; only changes are kept as view records (counts keep everything). */
  view(worker: number, kind: BreakerViewKind, at: number = now()): void {
    this.viewCounts[kind]++;
    if (this.lastView.get(worker) === kind) return;
    this.lastView.set(worker, kind);
    this.views.push({ worker, at, kind });
  }

  error(message: string): void {
    this.errors++;
    if (this.notes.length < 5) this.notes.push(message);
  }
}
