import {
  noopMetricMeter,
  type MetricCounter,
  type MetricGauge,
  type MetricHistogram,
  type MetricMeter,
} from '@temporalio/common';
import type { BreakerStateName, OutcomeKind } from '../../breaker';
import { METRIC, type FailOpenReason, type FallbackTier, type MosaicFinish } from '../../messages/metrics';
import type { StatusCounts } from '../../messages/mosaic-types';

/** Every state a breaker can show: the state gauge has one series per state, 1 for the current one. */
export const BREAKER_STATES: readonly BreakerStateName[] = [
  'closed',
  'open',
  'half-open',
  'forced-open',
  'forced-closed',
  'metrics-only',
];

interface Instruments {
  meter: MetricMeter;
  breakerState: MetricGauge;
  requests: MetricCounter;
  requestDuration: MetricHistogram;
  selfProbes: MetricCounter;
  notPermitted: MetricCounter;
  guardFailOpen: MetricCounter;
  guardReportsDropped: MetricCounter;
  guardEntityWedged: MetricCounter;
  guardQuarantined: MetricGauge;
  guardQuarantines: MetricCounter;
  fallback: MetricCounter;
  contractBreaches: MetricCounter;
  mosaicTiles: MetricCounter;
  mosaicsFinished: MetricCounter;
  deadLettersPending: MetricGauge;
}

/**
 * One worker process's metrics (docs/metrics.md): one call per event, so the fetch, the guard and the
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

  /** One request an entity's self-probe sent through this worker (its probe activity), classified as the probe judged it. */
  selfProbe(endpoint: string, outcome: OutcomeKind): void {
    this.instruments().selfProbes.add(1, { endpoint, outcome });
  }

  /** The guard refused a call (the breaker's state said no). */
  notPermitted(endpoint: string, state: BreakerStateName): void {
    this.instruments().notPermitted.add(1, { endpoint, state });
  }

  /** The guard let a call through unprotected: the entity could not be reached, was wedged, or does not hear this worker. */
  failOpen(endpoint: string, reason: FailOpenReason = 'unreachable'): void {
    this.instruments().guardFailOpen.add(1, { endpoint, reason });
  }

  /** A report to the endpoint's entity failed after the client's retries and was dropped. */
  reportDropped(endpoint: string): void {
    this.instruments().guardReportsDropped.add(1, { endpoint });
  }

  /** The guard found the endpoint's entity wedged (once per episode) and fails open for it. */
  entityWedged(endpoint: string): void {
    this.instruments().guardEntityWedged.add(1, { endpoint });
  }

  /** This process quarantined itself from an endpoint (`on`), or lifted it. */
  quarantine(endpoint: string, on: boolean): void {
    const m = this.instruments();
    m.guardQuarantined.set(on ? 1 : 0, { endpoint });
    if (on) m.guardQuarantines.add(1, { endpoint });
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

  /** An answer refused because it broke the caller's contract (`run`, `runChain`); `endpoint`: its breaker key. */
  contractBreach(endpoint: string): void {
    this.instruments().contractBreaches.add(1, { endpoint });
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
      breakerState: meter.createGauge(
        METRIC.breakerState,
        'int',
        undefined,
        "1 for the breaker state this worker's cached view shows, 0 for the others",
      ),
      requests: meter.createCounter(
        METRIC.requests,
        undefined,
        'HTTP requests to tile endpoints, by outcome classification',
      ),
      requestDuration: meter.createHistogram(
        METRIC.requestDuration,
        'float',
        undefined,
        'HTTP request duration to tile endpoints, in seconds',
      ),
      selfProbes: meter.createCounter(
        METRIC.selfProbes,
        undefined,
        "requests the breaker entities' self-probes sent through this worker, by the probe's classification",
      ),
      notPermitted: meter.createCounter(METRIC.notPermitted, undefined, 'calls the breaker guard refused'),
      guardFailOpen: meter.createCounter(
        METRIC.guardFailOpen,
        undefined,
        'calls let through unprotected: the breaker entity could not be reached, was wedged, or did not hear the reports',
      ),
      guardReportsDropped: meter.createCounter(
        METRIC.guardReportsDropped,
        undefined,
        'reports to a breaker entity that failed after retries and were dropped',
      ),
      guardEntityWedged: meter.createCounter(
        METRIC.guardEntityWedged,
        undefined,
        'times a breaker entity was found wedged (its timers overdue or a workflow task left undone)',
      ),
      guardQuarantined: meter.createGauge(
        METRIC.guardQuarantined,
        'int',
        undefined,
        "1 while this worker's own calls to the endpoint are quarantined (they fail far more than the fleet's)",
      ),
      guardQuarantines: meter.createCounter(
        METRIC.guardQuarantines,
        undefined,
        'times this worker quarantined its own calls to the endpoint',
      ),
      fallback: meter.createCounter(
        METRIC.fallback,
        undefined,
        'tiles (or guarded calls) served by a fallback instead of a fetch from the primary',
      ),
      contractBreaches: meter.createCounter(
        METRIC.contractBreaches,
        undefined,
        "answers refused because they broke the caller's contract",
      ),
      mosaicTiles: meter.createCounter(
        METRIC.mosaicTiles,
        undefined,
        "tiles of finished mosaic runs, by the manifest's status",
      ),
      mosaicsFinished: meter.createCounter(METRIC.mosaicsFinished, undefined, 'mosaic runs finished, by result'),
      deadLettersPending: meter.createGauge(
        METRIC.deadLettersPending,
        'int',
        undefined,
        'dead letters left when the mosaic last finished (0 after a re-drive clears them)',
      ),
    };
    return this.made;
  }
}

/** Metrics that go nowhere: tests, library users that pass none. */
export const NO_METRICS = new WorkerMetrics(() => noopMetricMeter);
