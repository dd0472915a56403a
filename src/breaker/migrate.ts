import { DEFAULT_POLICY_CONFIG, type PolicyConfig } from './config';
import type { PolicyState } from './state';

/**
 * What a setting missing from a carried configuration meant to the release that carried it: the rule it
 * added was off there. A breaker keeps the rules it ran on across an upgrade (an operator turns the newer ones
 * on with `breaker configure`); a setting not named here gets today's default.
 */
const BEFORE_THE_SETTING: Partial<PolicyConfig> = {
  fastWindowFollowsLatency: false,
  fastWindowFollowsFloor: false,
  volumeFloor: 5,
  smallFleetFloor: null,
  quorum: 1,
  slowCallMs: null,
  retryAfterPauses: false,
  flapWindowMs: null,
  probeIntervalMs: null,
  probeBackoff: 1,
  probeTrials: null,
  maxRequestsPerSecond: null,
};

/** A policy state as any release carried it: its older shapes lack fields added since. */
export type CarriedPolicyState = Omit<
  PolicyState,
  'version' | 'config' | 'probeFailures' | 'failedTrials' | 'pacedUntil'
> & {
  version: number;
  config: Partial<PolicyConfig>;
  probeFailures?: number;
  failedTrials?: number;
  pacedUntil?: number | null;
};

/**
 * Brings a policy state carried by any earlier release (version 1, with settings and fields added since
 * missing) to this release's shape. Pure and idempotent: a current state comes back unchanged.
 */
export function migratePolicyState(carried: PolicyState | CarriedPolicyState): PolicyState {
  if (carried.version === 2) return carried as PolicyState;
  const old = carried as CarriedPolicyState;
  const config = { ...DEFAULT_POLICY_CONFIG } as Record<string, unknown>;
  for (const field of Object.keys(DEFAULT_POLICY_CONFIG) as (keyof PolicyConfig)[]) {
    if (old.config[field] !== undefined) config[field] = old.config[field];
    else if (field in BEFORE_THE_SETTING) config[field] = BEFORE_THE_SETTING[field];
  }
  return {
    ...old,
    version: 2,
    config: config as PolicyConfig,
    probeFailures: old.probeFailures ?? 0,
    failedTrials: old.failedTrials ?? 0,
    pacedUntil: old.pacedUntil ?? null,
  };
}
