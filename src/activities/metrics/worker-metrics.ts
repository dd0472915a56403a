import { noopMetricMeter, type MetricCounter, type MetricGauge, type MetricHistogram, type MetricMeter } from '@temporalio/common';
import type { BreakerStateName, OutcomeKind } from '../../breaker';
import { METRIC, type FallbackTier, type MosaicFinish } from '../../messages/metrics';
import type { StatusCounts } from '../../messages/mosaic-types';

/** Every state a breaker can show: the state gauge has one series per state, 1 for the current one. */
export const BREAKER_STATES: readonly BreakerStateName[] = ['closed', 'open', 'half-open', 'forced-open', 'forced-closed', 'metrics-only'];

interface Instruments {
  meter: MetricMeter;
  breakerState: MetricGauge;
  requests: MetricCounter;
  requestDuration: MetricHistogram;
  notPermitted: MetricCounter;
  guardFailOpen: MetricCounter;
  fallback: MetricCounter;
  mosaicTiles: MetricCounter;
  mosaicsFinished: MetricCounter;
  deadLettersPending: MetricGauge;
}

/**
 * One worker process's metrics (README, "Metrics"): one call per event, so the fetch, the guard and the
 * assembly say what happened and nothing about Prometheus. The meter is asked for on each event (it is the
 * runtime's, which a shut-down runtime swaps for a no-op); with no telemetry installed it is a no-op.
 */
export class WorkerMetrics {
  private made: Instruments | null = null;

  constructor(private readonly meter: () => MetricMeter) {}

  /** One HTTP request to an endpoint, classified; `seconds` from sending to the answer (or the failure). */
  request(source: string, endpoint: string, outcome: OutcomeKind, seconds: number): void {
    const m = this.instruments();
    m.requests.add(1, { source, endpoint, outcome });
    m.requestDuration.record(Math.max(0, seconds), { source, endpoint });
  }

  /** The guard refused a call (the breaker's state said no). */
  notPermitted(endpoint: string, state: BreakerStateName): void {
    this.instruments().notPermitted.add(1, { endpoint, state });
  }

  /** The guard let a call through because the entity could not be reached. */
  failOpen(endpoint: string): void {
    this.instruments().guardFailOpen.add(1, { endpoint });
  }

  /** This process's view of a breaker: 1 for `state`, 0 for the others; null: no view (all 0). */
  breakerState(endpoint: string, state: BreakerStateName | null): void {
    const g = this.instruments().breakerState;
    for (const s of BREAKER_STATES) g.set(s === state ? 1 : 0, { endpoint, state: s });
  }

  /** Tiles a fallback served instead of a fetched tile; `endpoint`: the source's breaker key. */
  fallback(source: string, endpoint: string, tier: FallbackTier, tiles: number): void {
    if (tiles > 0) this.instruments().fallback.add(tiles, { source, endpoint, tier });
  }

  /** A mosaic run ended (assembled, or its partial manifest written): its counts and its result. */
  mosaicFinished(mosaic: string, result: MosaicFinish, counts: StatusCounts): void {
    const m = this.instruments();
    for (const [status, n] of Object.entries(counts)) m.mosaicTiles.add(n, { mosaic, status });
    m.mosaicsFinished.add(1, { result });
  }

  /** The dead letters a mosaic has left, as its manifest says now. */
  deadLettersPending(mosaic: string, tiles: number): void {
    this.instruments().deadLettersPending.set(tiles, { mosaic });
  }

  private instruments(): Instruments {
    const meter = this.meter();
    if (this.made?.meter === meter) return this.made;
    this.made = {
      meter,
      breakerState: meter.createGauge(METRIC.breakerState, 'int', undefined, "1 for the breaker state this worker's cached view shows, 0 for the others"),
      requests: meter.createCounter(METRIC.requests, undefined, 'HTTP requests to tile endpoints, by outcome classification'),
      requestDuration: meter.createHistogram(METRIC.requestDuration, 'float', undefined, 'HTTP request duration to tile endpoints, in seconds'),
      notPermitted: meter.createCounter(METRIC.notPermitted, undefined, 'calls the breaker guard refused'),
      guardFailOpen: meter.createCounter(METRIC.guardFailOpen, undefined, 'calls let through because the breaker entity could not be reached'),
      fallback: meter.createCounter(METRIC.fallback, undefined, 'tiles served by a fallback instead of a fetch'),
      mosaicTiles: meter.createCounter(METRIC.mosaicTiles, undefined, "tiles of finished mosaic runs, by the manifest's status"),
      mosaicsFinished: meter.createCounter(METRIC.mosaicsFinished, undefined, 'mosaic runs finished, by result'),
      deadLettersPending: meter.createGauge(METRIC.deadLettersPending, 'int', undefined, 'dead letters left when the mosaic last finished (0 after a re-drive clears them)'),
    };
    return this.made;
  }
}

/** Metrics that go nowhere: tests, library users that pass none. */
export const NO_METRICS = new WorkerMetrics(() => noopMetricMeter);
