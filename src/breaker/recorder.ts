import type { PolicyState, StepResult, TransitionReason, TransitionRecord } from './state';
import { stateName } from './view';

/** Accumulates the new state and the transitions one step makes. */
export class Recorder {
  readonly transitions: TransitionRecord[] = [];
  private ignored: string | undefined;
  private declined: string | undefined;
  private trialOutcome: 'success' | 'failure' | undefined;
  constructor(
    private current: StepResult | PolicyState,
    readonly now: number,
  ) {
    if ('transitions' in current) {
      this.transitions.push(...current.transitions);
      this.current = current.state;
    }
  }

  get state(): PolicyState {
    return this.current as PolicyState;
  }

  patch(fields: Partial<PolicyState>): void {
    this.current = { ...this.state, ...fields };
  }

  /** Patches and records the transition; `always` records even when the state name does not change. */
  move(
    fields: Partial<PolicyState>,
    reason: TransitionReason,
    detail: string,
    always = false,
    extra: Partial<TransitionRecord> = {},
  ): void {
    const before = this.state;
    this.patch(fields);
    const after = this.state;
    // In metrics-only mode the phase moves in the shadow: recorded, but the fleet still sees metrics-only.
    const shadow = before.mode === 'metrics-only' && after.mode === 'metrics-only';
    const from = shadow ? before.phase : stateName(before);
    const to = shadow ? after.phase : stateName(after);
    if (from === to && !always) return;
    this.transitions.push({ at: this.now, from, to, reason, detail, ...extra, ...(shadow ? { shadow: true } : {}) });
  }

  ignore(why: string): void {
    this.ignored = why;
  }

  /** A probe's result counted as a trial, success or failure (whether or not it moved the breaker). */
  trial(outcome: 'success' | 'failure'): void {
    this.trialOutcome = outcome;
  }

  decline(why: string): void {
    this.declined = why;
  }

  result(): StepResult {
    return {
      state: this.state,
      transitions: this.transitions,
      ...(this.ignored ? { ignored: this.ignored } : {}),
      ...(this.declined ? { declined: this.declined } : {}),
      ...(this.trialOutcome ? { trial: this.trialOutcome } : {}),
    };
  }
}
