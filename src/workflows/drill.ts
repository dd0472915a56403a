import { ApplicationFailure, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import {
  ConfigError,
  initialState,
  nextDeadline,
  permit,
  step,
  stateName,
  windowFigures,
  type BreakerStateName,
  type PolicyEvent,
  type PolicyState,
} from '../breaker';
import { checkDrillInput, drillStatusQuery, type DrillInput, type DrillResult } from '../messages/drill';
import { BREAKER_KEY, BREAKER_STATE } from '../messages/search-attributes';

/**
 * A breaker drill: plays a scripted sequence of policy events against a breaker configuration on the
 * workflow clock, with cooldowns, leases and timed force-opens running on durable timers exactly as the
 * entity runs them. Use it to rehearse a configuration against an outage ("with these settings, how long
 * would last night's outage have held the breaker open, and how many probes would it have let through?").
 */
export async function breakerDrillWorkflow(input: DrillInput): Promise<DrillResult> {
  let state: PolicyState = initialState(parseInput(input));
  const startedAt = Date.now();
  const result: DrillResult = { startedAt, finalState: 'closed', transitions: [], decisions: [], ignored: [] };
  let stepsApplied = 0;
  const publish = (name: BreakerStateName) => {
    if (input.upsertSearchAttributes) {
      upsertSearchAttributes([
        { key: BREAKER_STATE, value: name },
        { key: BREAKER_KEY, value: input.key ?? 'drill' },
      ]);
    }
  };
  const apply = (event: PolicyEvent) => {
    const now = Date.now();
    // Workflow Math.random is seeded per run, so the jitter it draws replays identically.
    const out = step(state, event, now, Math.random());
    state = out.state;
    if (out.transitions.length) {
      result.transitions.push(...out.transitions);
      publish(stateName(state));
    }
    if (out.decision) result.decisions.push(out.decision);
    if (out.ignored) result.ignored.push({ atMs: now - startedAt, why: out.ignored });
  };
  // Sleeps until `until`, waking at every deadline the state holds so each timed transition happens on time.
  const runUntil = async (until: number) => {
    for (;;) {
      const now = Date.now();
      if (now >= until) return;
      const deadline = nextDeadline(state, now);
      await sleep(Math.min(until, deadline ?? until) - now);
      if (deadline !== null && deadline <= until) apply({ type: 'tick' });
    }
  };

  setHandler(drillStatusQuery, () => ({
    elapsedMs: Date.now() - startedAt,
    stepsApplied,
    permit: permit(state, Date.now()),
    figures: windowFigures(state, Date.now()),
  }));

  publish(stateName(state));
  for (const s of input.steps) {
    await runUntil(startedAt + s.atMs);
    apply(s.event);
    stepsApplied++;
  }
  const lastAt = input.steps.length ? input.steps[input.steps.length - 1]!.atMs : 0;
  await runUntil(startedAt + lastAt + (input.settleMs ?? 0));
  result.finalState = stateName(state);
  return result;
}

function parseInput(input: DrillInput) {
  try {
    return checkDrillInput(input);
  } catch (err) {
    // A bad input fails the workflow at once instead of retrying the workflow task forever.
    if (err instanceof ConfigError) throw ApplicationFailure.nonRetryable(err.message, 'ConfigError');
    throw err;
  }
}
