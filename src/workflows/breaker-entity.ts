import { allHandlersFinished, condition, makeContinueAsNewFunc } from '@temporalio/workflow';
import type { EntityExit, EntityInput } from '../messages/breaker';
import { checkSignal } from '../messages/breaker-validation';
import { entityOptions } from './breaker-entity/config';
import { registerHandlers } from './breaker-entity/handlers';
import { searchAttributesRegistered } from './breaker-entity/publication';
import { SelfProbe } from './breaker-entity/self-probe';
import { EntityState } from './breaker-entity/state';
import { EntityTimers } from './breaker-entity/timers';

/**
 * One breaker, fleet-wide: the long-lived entity workflow `breaker/<key>` (see ARCHITECTURE.md, "The life of a
 * breaker"). It holds the policy state and drives it with the workflow clock and seeded randomness; workers
 * report outcomes and ask for probe tokens by signal and read the state by query. Cooldowns, leases and timed
 * force-opens run on durable timers; when half-open and nobody asks for a probe, the entity probes the endpoint
 * itself.
 */
export async function breakerEntityWorkflow(input: EntityInput): Promise<EntityExit> {
  const opts = entityOptions(input.options);
  const entity = new EntityState(input, opts);
  if (entity.probeSpec) {
    // The start input is anyone's too (signal-with-start): a probe it cannot run safely is dropped.
    const c = checkSignal('admin', { action: 'set-probe', probe: entity.probeSpec });
    if (!c.ok) {
      entity.probeSpec = null;
      entity.refused('start', c.problem);
    }
  }
  const selfProbe = new SelfProbe(entity, opts);
  registerHandlers(entity);

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
      // fresh, closed breaker until its first task completes: calls went out while half-open in that gap. It
      // starts on the deployment's current build (this run is pinned to its own).
      await makeContinueAsNewFunc<typeof breakerEntityWorkflow>({
        memo: { view: entity.view() },
        initialVersioningBehavior: 'AUTO_UPGRADE',
      })(next);
    }
  }
}
