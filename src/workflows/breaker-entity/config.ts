import { log } from '@temporalio/workflow';
import { ConfigError, initialState, parsePolicyConfig, POLICY_BOUNDS, type PolicyState } from '../../breaker';
import type { EntityInput, EntityOptions } from '../../messages/breaker';

const DEFAULTS: Required<EntityOptions> = {
  idleMs: 3_600_000,
  selfProbeDelayMs: 2_000,
  maxHistoryEvents: 2_000,
  logSize: 500,
  searchAttributes: 'auto',
};

/**
 * The options, held to sane bounds: anyone who can start the entity chooses them, and a history limit of 0
 * would continue it as new every second, forever.
 */
export function entityOptions(options: EntityOptions | undefined): Required<EntityOptions> {
  const o = { ...DEFAULTS, ...options };
  const clamp = (v: number, min: number, max: number, fallback: number) =>
    Number.isFinite(v) ? Math.min(max, Math.max(min, v)) : fallback;
  return {
    ...o,
    idleMs: clamp(o.idleMs, 1, 30 * 86_400_000, DEFAULTS.idleMs),
    selfProbeDelayMs: clamp(o.selfProbeDelayMs, 1, 3_600_000, DEFAULTS.selfProbeDelayMs),
    maxHistoryEvents: clamp(o.maxHistoryEvents, 50, 40_000, DEFAULTS.maxHistoryEvents),
    logSize: clamp(o.logSize, 1, 5_000, DEFAULTS.logSize),
  };
}

/** The history limit of runs that carry the bounded payload, unless the options name one. */
export const COMPACT_MAX_HISTORY_EVENTS = 1_000;

/** `opts` with the compact-carry history limit, where the caller's options named none. */
export function withHistoryDefault(
  opts: Required<EntityOptions>,
  options: EntityOptions | undefined,
): Required<EntityOptions> {
  return options?.maxHistoryEvents === undefined ? { ...opts, maxHistoryEvents: COMPACT_MAX_HISTORY_EVENTS } : opts;
}

/** New entities' defaults added after the positional ones, each behind its own patch (breaker-entity.ts). */
export interface LaterDefaults {
  /** probeBackoff 2 (the 'probe-backoff' patch). */
  trialBackoff?: boolean;
  /** slowCallMs 10 s (the 'slow-calls' patch). */
  slowCalls?: boolean;
  /** fastWindowFollowsLatency, and the fleet's stall threshold in the view (the 'render-time-stalls' patch). */
  renderTimeStalls?: boolean;
  /** Configurations held to POLICY_BOUNDS: the start input's and every configure's (the 'config-bounds' patch). */
  configBounds?: boolean;
  /** flapWindowMs twice the cooldown: one incident is one open (the 'one-incident' patch). */
  oneIncident?: boolean;
  /** fastWindowFollowsFloor: a small fleet's stalls judged over a render time early in a run (the 'stall-span' patch). */
  stallSpan?: boolean;
  /** retryAfterPauses: a failure's Retry-After pauses the fleet (the 'retry-after-pause' patch). */
  retryAfterPause?: boolean;
}

/**
 * A new run's policy state, from the input's configuration. `rateLimits`: the run knows rate limits (see
 * the 'rate-limit' patch); a run recorded before them replays as it ran, without a maxRequestsPerSecond.
 */
export function initialPolicy(
  key: string,
  config: EntityInput['config'],
  rateLimits: boolean,
  probeCadence: boolean,
  smallFleet = false,
  quorum = false,
  later: LaterDefaults = {},
): PolicyState {
  const parsed = parseConfig(key, rateLimits ? config : withoutRate(config), later.configBounds ?? false);
  // A run recorded before the probe cadence replays with a failed probe waiting the full grown cooldown.
  if (probeCadence && !(config && 'probeIntervalMs' in config))
    parsed.probeIntervalMs = Math.min(parsed.cooldownMs, DEFAULT_PROBE_INTERVAL_MS);
  // And one recorded before small fleets' floors replays with volumeFloor holding whatever the concurrency.
  if (smallFleet && !(config && 'smallFleetFloor' in config)) parsed.smallFleetFloor = DEFAULT_SMALL_FLEET_FLOOR;
  // And one recorded before the quorum replays with a single reporter's failures able to trip it.
  if (quorum && !(config && 'quorum' in config)) parsed.quorum = DEFAULT_QUORUM;
  // And one recorded before failed trials backed off replays with every failed probe waiting probeIntervalMs.
  if (later.trialBackoff && !(config && 'probeBackoff' in config)) parsed.probeBackoff = DEFAULT_PROBE_BACKOFF;
  // And one recorded before the slow-call rate replays with completed slow calls never counted.
  if (later.slowCalls && !(config && 'slowCallMs' in config)) parsed.slowCallMs = DEFAULT_SLOW_CALL_MS;
  // And one recorded before the fast window followed the latency replays with a one-second fast window.
  if (later.renderTimeStalls && !(config && 'fastWindowFollowsLatency' in config))
    parsed.fastWindowFollowsLatency = true;
  // And one recorded before incidents replays with every failed probe an open, forgiven only by cooldownDecayMs.
  if (later.oneIncident && !(config && 'flapWindowMs' in config))
    parsed.flapWindowMs = Math.min(2 * parsed.cooldownMs, POLICY_BOUNDS.flapWindowMs.max);
  // And one recorded before it replays with the fast window following the latency only from latencyMinSamples.
  if (later.stallSpan && !(config && 'fastWindowFollowsFloor' in config)) parsed.fastWindowFollowsFloor = true;
  // And one recorded before it replays with a 503's Retry-After heard only as the next cooldown's least.
  if (later.retryAfterPause && !(config && 'retryAfterPauses' in config)) parsed.retryAfterPauses = true;
  return initialState(parsed);
}

/** A new entity's lowest sample floor for a fleet with fewer calls in flight than volumeFloor. */
// 3, not 2: two calls dropped together as a hung server comes back are too little to open on.
const DEFAULT_SMALL_FLEET_FLOOR = 3;

/** A new entity's quorum: the failure-ratio rules need failures from this many reporters (or every active one). */
const DEFAULT_QUORUM = 2;

/**
 * A new entity's slow-call threshold: half of the completed calls slower than this trips. Tile renders take
 * milliseconds to a few seconds (a metatile); a renderer answering in 10 s or more is drowning, and the
 * header timeout (15 s by default) turns slower calls into failures anyway.
 */
const DEFAULT_SLOW_CALL_MS = 10_000;

/** A new entity's growth of the wait after each failed trial in a row (to probeIntervalMs x cooldownMaxFactor). */
const DEFAULT_PROBE_BACKOFF = 2;

/** A new entity's probe cadence after a failed probe, unless its configuration names one. */
const DEFAULT_PROBE_INTERVAL_MS = 5_000;

function withoutRate<C extends object | undefined>(c: C): C {
  if (!c || !('maxRequestsPerSecond' in c)) return c;
  const { maxRequestsPerSecond: _dropped, ...rest } = c as { maxRequestsPerSecond?: unknown };
  return rest as C;
}

/**
 * The entity's configuration. An invalid one does not fail the run (the next report would only start another
 * failing run): the breaker runs on defaults and says why, loudly; `configure` can fix it.
 */
function parseConfig(key: string, config: EntityInput['config'], bounded: boolean) {
  try {
    return parsePolicyConfig(config ?? {}, { bounded });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    log.error('invalid breaker configuration; running on defaults', { key, error: err.message });
    return parsePolicyConfig({});
  }
}
