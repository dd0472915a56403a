import type { BreakerStateName } from '../breaker';
import { zeroStatusCounts, type MosaicProgress, type StatusCounts } from '../messages/mosaic-types';
import type { ProgressCarry } from './mosaic-continue';

/** Live progress shared with a `progress` query handler. */
export class ProgressTracker {
  readonly progress: MosaicProgress;
  private fetchStartedAt: number | null = null;
  /** Told after every add (the mosaic publishes its progress from it, at coarse steps). */
  onAdd: ((p: MosaicProgress) => void) | null = null;

  constructor(total: number) {
    this.progress = {
      total,
      done: 0,
      counts: zeroStatusCounts(),
      phase: 'planning',
      etaSeconds: null,
      runningBlocks: [],
      breakerStates: [],
      breakerKeys: [],
      waitingUntil: null,
      waitingFor: null,
    };
  }

  /** Where the run before this one left off (it continued as new). */
  restore(c: ProgressCarry): void {
    const p = this.progress;
    p.counts = { ...c.counts };
    p.done = Object.values(c.counts).reduce((a, b) => a + b, 0);
    p.breakerStates = [...c.breakerStates];
    this.fetchStartedAt = c.fetchStartedAt;
    p.phase = 'fetching';
  }

  carry(): ProgressCarry {
    return {
      counts: { ...this.progress.counts },
      breakerStates: [...this.progress.breakerStates],
      fetchStartedAt: this.fetchStartedAt,
    };
  }

  startFetching(): void {
    this.progress.phase = 'fetching';
    this.fetchStartedAt ??= Date.now();
  }

  add(counts: StatusCounts, states: BreakerStateName[]): void {
    const p = this.progress;
    // A count one side lacks is 0: a run carried over from a release before the `outside` status has none.
    for (const k of Object.keys(counts) as (keyof StatusCounts)[]) {
      p.counts[k] = (p.counts[k] ?? 0) + (counts[k] ?? 0);
      p.done += counts[k] ?? 0;
    }
    for (const s of states) if (!p.breakerStates.includes(s)) p.breakerStates.push(s);
    const elapsed = Date.now() - (this.fetchStartedAt ?? Date.now());
    p.etaSeconds = p.done > 0 && elapsed > 0 ? Math.round(((p.total - p.done) * elapsed) / p.done / 1000) : null;
    this.onAdd?.(p);
  }
}
