import type { WorkerMetrics } from '../metrics/worker-metrics';
import type { GuardDecision, GuardStats } from './types';

/**
 * Reports (outcome batches and probe results) that never reached their entity. Each one dropped is counted
 * (`tilebreaker_guard_reports_dropped_total`). After `blindAfter` in a row for a key, the entity no longer
 * hears this process: its view still decides (it is read fresh, and other workers' reports and operators'
 * actions still move it), but every call this process lets through to the key is counted as failing open
 * (reason `reports-dropped`), since this process's failures cannot trip the breaker. The first report
 * delivered ends it.
 */
export class ReportLoss {
  private readonly streaks = new Map<string, number>();

  constructor(
    private readonly blindAfter: number,
    private readonly stats: GuardStats,
    private readonly metrics: WorkerMetrics,
    private readonly logger: { warn(message: string, meta?: Record<string, unknown>): void },
  ) {
    if (!(Number.isInteger(blindAfter) && blindAfter >= 1))
      throw new RangeError(`blindAfterDrops must be an integer >= 1 (got ${blindAfter})`);
  }

  /** A report to `key`'s entity failed after the client's retries and is dropped. */
  dropped(key: string): void {
    this.stats.reportErrors++;
    this.metrics.reportDropped(key);
    const n = (this.streaks.get(key) ?? 0) + 1;
    this.streaks.set(key, n);
    if (n === this.blindAfter)
      this.logger.warn(
        'reports to the breaker entity keep failing; calls to its endpoint count as failing open until one is delivered',
        { key, droppedInARow: n },
      );
  }

  /** A report reached `key`'s entity. */
  delivered(key: string): void {
    const n = this.streaks.get(key);
    if (n === undefined) return;
    if (n >= this.blindAfter) this.logger.warn('reports reach the breaker entity again', { key, droppedInARow: n });
    this.streaks.delete(key);
  }

  /** The entity has not heard this process's last `blindAfter` reports. */
  blind(key: string): boolean {
    return (this.streaks.get(key) ?? 0) >= this.blindAfter;
  }

  /**
   * `decision`, marked as failing open when it lets a call through to an entity that cannot hear of it. (The
   * guard's own decision applies this rule in decide.ts, from `blind`.)
   */
  mark(decision: GuardDecision): GuardDecision {
    if (decision.kind !== 'proceed' || decision.failOpen || !this.blind(decision.key)) return decision;
    this.stats.failOpen++;
    this.stats.blindFailOpen++;
    return { ...decision, failOpen: true, failOpenReason: 'reports-dropped' };
  }
}
