import type { Command } from 'commander';
import { BREAKER_STATES, listBreakers } from '../../client/breakers';
import { listJson } from '../format';
import { formatList } from './format';
import { parseState, type WithClient } from './options';

/** `breaker list`: the running entities with their state. */
export function registerBreakerList(breaker: Command, withClient: WithClient): void {
  breaker
    .command('list')
    .description(
      'list the running breaker entities with their state (by the BreakerState / BreakerKey search attributes)',
    )
    .option(
      '--state <state>',
      `only breakers in this state (${BREAKER_STATES.join(', ')}; open includes forced-open)`,
      parseState,
    )
    .option('--json', 'print JSON')
    .action(async (opts: { state?: string; json?: boolean }) => {
      await withClient(async (client) => {
        const result = await listBreakers(client, opts.state !== undefined ? { state: opts.state } : {});
        console.log(
          opts.json
            ? listJson(result.breakers, { query: result.query, filteredBy: result.filteredBy })
            : formatList(result, opts.state, Date.now()),
        );
      });
    });
}
