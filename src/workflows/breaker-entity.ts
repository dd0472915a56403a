import { allHandlersFinished, condition, continueAsNew, makeContinueAsNewFunc, patched } from '@temporalio/workflow';
import type { EntityExit, EntityInput } from '../messages/breaker';
import { checkSignal } from '../messages/breaker-validation';
import { entityOptions, withHistoryDefault } from './breaker-entity/config';
import { registerHandlers } from './breaker-entity/handlers';
import { searchAttributesRegistered } from './breaker-entity/publication';
import { SelfProbe } from './breaker-entity/self-probe';
import { EntityState } from './breaker-entity/state';
import { EntityTimers } from './breaker-entity/timers';

/**
 * One breaker, fleet-wide: the long-lived entity workflow `breaker/<key>` (see ARCHITECTURE.md, "The life of a breaker"). It holds the
 * policy state and drives it with the workflow clock and seeded randomness; workers report outcomes and ask
 * for probe tokens by signal and read the state by query. Cooldowns, leases and timed force-opens run on
 * durable timers; when half-open and nobody asks for a probe, the entity probes the endpoint itself.
 *
 * The order of what happens here up to the loop (patches, handlers, the memo, the search-attribute check)
 * is what recorded histories replay against: keep it.
 */
export async function breakerEntityWorkflow(input: EntityInput): Promise<EntityExit> {
  const opts0 = entityOptions(input.options);
  // Rate limits arrived after entities were already running: a run recorded before them must replay as it
  // ran, when a maxRequestsPerSecond it could not know was rejected (configure) or not there (defaults).
  const rateLimits = patched('rate-limit');
  // The probe cadence after a failed probe (probeIntervalMs) is set for entities started after it existed.
  const probeCadence = patched('probe-cadence');
  // A probe slower than the latency budget fails (runs recorded before it replay with latency unseen).
  const probeLatency = patched('probe-latency');
  // A fleet with fewer calls in flight than volumeFloor can still trip on stalls (new entities).
  const smallFleet = patched('small-fleet-floor');
  // Continue-as-new carries a bounded payload (under 64 KB whatever the configuration), and sooner by default
  // (1,000 events, not 2,000): a workflow task stays cheap under a whole fleet's reports.
  const compactCarry = patched('compact-carry');
  const opts = compactCarry ? withHistoryDefault(opts0, input.options) : opts0;
  // The ratio rules need failures from 2 reporters (quorum), and the view carries the fleet's health for the
  // guards' quarantine: new entities only (a run recorded before them replays as it tripped and published).
  const quorum = patched('quorum');
  // Each failed trial in a row waits longer before the next (probeBackoff), and completed calls slower than
  // slowCallMs count toward a slow-call rate: new entities only. Then stalls judged by render time: the fast
  // window reaches back a p95 latency, and the view gives the fleet's stall threshold (runs before replay without).
  // Then the policy's bounds (a cooldown of 1e15 ms asked the server for a timer it refuses): a start input out of
  // them runs on defaults, a configure out of them is refused whole (runs before replay what they accepted).
  // Then one incident is one open: failed probes no longer count as opens (runs before replay with them counted).
  // Then the fast window follows the latency from the sample floor in force (runs before: from latencyMinSamples).
  // Then a failure's Retry-After pauses the fleet as a 429's does (runs before: only the next cooldown's least).
  const later = {
    trialBackoff: patched('probe-backoff'),
    slowCalls: patched('slow-calls'),
    renderTimeStalls: patched('render-time-stalls'),
    configBounds: patched('config-bounds'),
    oneIncident: patched('one-incident'),
    stallSpan: patched('stall-span'),
    retryAfterPause: patched('retry-after-pause'),
  };
  const entity = new EntityState(
    input,
    opts,
    rateLimits,
    probeCadence,
    probeLatency,
    smallFleet,
    compactCarry,
    quorum,
    later,
  );
  // A 429's Retry-After pauses the whole fleet (the view's pacedUntil, a memo change): runs recorded before it
  // replay without the pause.
  const pacing = patched('rate-limited-pacing');
  // Every signal's payload is checked and a bad one refused whole (counted, logged, never applied), and a report
  // may carry a worker's self-probe spec: a run recorded before the checks applied what it was sent.
  const checked = patched('signal-validation');
  if (checked && entity.probeSpec) {
    // The start input is anyone's too (signal-with-start): a probe it cannot run safely is dropped.
    const c = checkSignal('admin', { action: 'set-probe', probe: entity.probeSpec });
    if (!c.ok) {
      entity.probeSpec = null;
      entity.refused('start', c.problem);
    }
  }
  // Guards space their reports by the fleet's size: the view counts the reporters, each counted for as long as
  // it says it reports, and a report's older outcomes are spread over their span (runs before it replay without).
  entity.spacing = patched('report-spacing');
  // A configure that changes probesToClose or probeTrials while half-open starts the probe round again (runs
  // recorded before it replay with the round judged by both rules).
  entity.newProbeRound = patched('probe-round-rule');
  const selfProbe = new SelfProbe(entity, opts);
  registerHandlers(entity, rateLimits, pacing, checked);

  entity.publishView();
  if (entity.searchAttributesOn === null) entity.searchAttributesOn = await searchAttributesRegistered(entity.key);
  entity.publishState();
  const timers = new EntityTimers(entity, selfProbe, opts);
  for (;;) {
    await timers.sleep();
    entity.apply({ type: 'tick' });
    entity.wake = false;
    selfProbe.startIfDue();

    if (timers.quiet() && timers.idle()) {
      await condition(allHandlersFinished);
      if (timers.idle()) return entity.exit();
    }
    if (timers.historyFull()) {
      // Finish in-flight work first, so the next run starts with everything this one knew.
      await condition(() => allHandlersFinished() && !selfProbe.running);
      entity.counters.continuedAsNew++;
      const next: EntityInput = {
        key: input.key,
        ...(entity.probeSpec ? { probe: entity.probeSpec } : {}),
        ...(input.options ? { options: input.options } : {}),
        carried: entity.carried(),
      };
      // The next run starts with the view in its memo. Guards read the memo, and a run with none yet reads as a
      // fresh, closed breaker until its first task completes: calls went out while half-open in that gap.
      if (patched('memo-across-continue'))
        await makeContinueAsNewFunc<typeof breakerEntityWorkflow>({ memo: { view: entity.view() } })(next);
      else await continueAsNew<typeof breakerEntityWorkflow>(next);
    }
  }
}
