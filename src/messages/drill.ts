/** The breaker drill's input, result and status query: shared by the drill workflow, the CLI and tests. */
import { defineQuery } from '@temporalio/workflow';
import {
  ConfigError,
  parsePolicyConfig,
  type BreakerStateName,
  type Permit,
  type PolicyConfig,
  type PolicyConfigInput,
  type PolicyEvent,
  type ProbeDecision,
  type TransitionRecord,
  type WindowFigures,
} from '../breaker';

export interface DrillStep {
  /** When to apply the event, in ms after the drill starts; steps must be in non-decreasing order. */
  atMs: number;
  event: PolicyEvent;
}

export interface DrillInput {
  config?: PolicyConfigInput;
  steps: DrillStep[];
  /** Keep the clock running this long after the last step, so pending cooldowns can elapse. */
  settleMs?: number;
  /** Label for the BreakerKey search attribute. */
  key?: string;
  /** Keep BreakerState / BreakerKey search attributes current (the server must have them registered). */
  upsertSearchAttributes?: boolean;
}

export interface DrillResult {
  startedAt: number;
  finalState: BreakerStateName;
  transitions: TransitionRecord[];
  /** The answer to every probe-request step, in order. */
  decisions: ProbeDecision[];
  /** Steps whose event changed nothing it asked for, with the reason. */
  ignored: { atMs: number; why: string }[];
}

export interface DrillStatus {
  elapsedMs: number;
  stepsApplied: number;
  permit: Permit;
  figures: WindowFigures;
}

export const drillStatusQuery = defineQuery<DrillStatus>('drillStatus');

/**
 * A drill's input checked: steps in time order and a valid policy configuration (its ConfigError names the
 * field and the value). The workflow checks it, and so does the CLI before it starts anything.
 */
export function checkDrillInput(input: DrillInput): PolicyConfig {
  if (!input || !Array.isArray(input.steps))
    throw new ConfigError('drill input', [`steps: expected an array (got ${JSON.stringify(input?.steps)})`]);
  input.steps.forEach((s, i) => {
    const prev = i > 0 ? input.steps[i - 1]!.atMs : 0;
    if (typeof s.atMs !== 'number' || !(s.atMs >= prev)) {
      throw new ConfigError('drill input', [
        `steps.${i}.atMs: must be a number >= ${prev} (got ${JSON.stringify(s.atMs)})`,
      ]);
    }
  });
  return parsePolicyConfig(input.config ?? {});
}
