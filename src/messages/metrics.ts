/**
 * tilebreaker's Prometheus metrics: their names as the SDK's meter takes them. With the worker's
 * `countersTotalSuffix` the exporter adds `_total` to counters, so each counter's exported name is its name
 * here plus `_total` (docs/metrics.md). The alert rules and dashboards use the exported names: change
 * none of these without them.
 */
export const METRIC = {
  // From the breaker entity workflow (its metric meter: once per transition fleet-wide, skipped on replay).
  circuitOpen: 'tilebreaker_circuit_open',
  circuitTrips: 'tilebreaker_circuit_trips',
  circuitCloses: 'tilebreaker_circuit_closes',
  transitions: 'tilebreaker_breaker_transitions',
  openSeconds: 'tilebreaker_breaker_open_seconds',
  probes: 'tilebreaker_probes',
  signalsRefused: 'tilebreaker_breaker_signals_refused',
  // From each worker process (its guard and activities).
  breakerState: 'tilebreaker_breaker_state',
  requests: 'tilebreaker_requests',
  requestDuration: 'tilebreaker_request_duration_seconds',
  selfProbes: 'tilebreaker_self_probes',
  notPermitted: 'tilebreaker_not_permitted',
  guardFailOpen: 'tilebreaker_guard_fail_open',
  guardReportsDropped: 'tilebreaker_guard_reports_dropped',
  guardEntityWedged: 'tilebreaker_guard_entity_wedged',
  guardQuarantined: 'tilebreaker_guard_quarantined',
  guardQuarantines: 'tilebreaker_guard_quarantines',
  fallback: 'tilebreaker_fallback',
  contractBreaches: 'tilebreaker_contract_breaches',
  mosaicTiles: 'tilebreaker_mosaic_tiles',
  mosaicsFinished: 'tilebreaker_mosaics_finished',
  deadLettersPending: 'tilebreaker_dead_letters_pending',
} as const;

/** `reason` of tilebreaker_circuit_open_total: the policy's reasons for an open, with `forced-open` as `forced`. */
export const OPEN_REASONS = [
  'failure-ratio',
  'latency',
  'slow-calls',
  'permanent-surge',
  'probe-failed',
  'forced',
] as const;

/** `reason` of tilebreaker_circuit_trips_total: the rules that open a closed breaker. */
export const TRIP_REASONS = ['failure-ratio', 'latency', 'slow-calls', 'permanent-surge'] as const;

/**
 * `reason` of tilebreaker_circuit_closes_total: how a breaker that refused traffic (open, half-open, forced
 * open) came to let it through again: its probes, or an operator's force-close, reset or disable.
 */
export const CLOSE_REASONS = ['probes-succeeded', 'forced-close', 'reset', 'disabled'] as const;

/** `result` of tilebreaker_mosaics_finished_total. */
export type MosaicFinish = 'complete' | 'gaps' | 'deadline-missed' | 'failed';

/** `tier` of tilebreaker_fallback_total. */
export type FallbackTier = 'stale' | 'hole' | 'dead-letter' | 'mirror';

/** `reason` of tilebreaker_guard_fail_open_total: the entity could not be read, was wedged, or did not hear this worker's reports. */
export const FAIL_OPEN_REASONS = ['unreachable', 'wedged', 'reports-dropped'] as const;
export type FailOpenReason = (typeof FAIL_OPEN_REASONS)[number];
