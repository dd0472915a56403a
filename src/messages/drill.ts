/** The breaker drill's input, result and status query: shared by the drill workflow, the CLI and tests. */
import { defineQuery } from '@temporalio/workflow';
import type { BreakerStateName, Permit, PolicyConfigInput, PolicyEvent, ProbeDecision, TransitionRecord, WindowFigures } from '../breaker';

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
