import { log } from '@temporalio/workflow';
import { ConfigError, initialState, parsePolicyConfig, type PolicyState } from '../../breaker';
import type { EntityInput, EntityOptions } from '../../messages/breaker';

const DEFAULTS: Required<EntityOptions> = {
  idleMs: 3_600_000,
  selfProbeDelayMs: 2_000,
  // Continue-as-new carries a bounded payload (carry.ts) at this many events: a workflow task stays cheap
  // under a whole fleet's reports.
  maxHistoryEvents: 1_000,
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

/**
 * A new run's policy state, from the input's configuration. An invalid one does not fail the run (the next
 * report would only start another failing run): the breaker runs on defaults and says why, loudly;
 * `configure` can fix it.
 */
export function initialPolicy(key: string, config: EntityInput['config']): PolicyState {
  try {
    return initialState(parsePolicyConfig(config ?? {}));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    log.error('invalid breaker configuration; running on defaults', { key, error: err.message });
    return initialState(parsePolicyConfig({}));
  }
}
