import type { Command } from 'commander';
import { registerBreakerAdmin } from './breaker/admin';
import { registerBreakerConfigure } from './breaker/configure';
import { registerBreakerList } from './breaker/list';
import type { WithClient } from './breaker/options';
import { registerBreakerShow } from './breaker/show';

/**
 * `tilebreaker breaker list | show | open | close | force-close | reset | configure`: the operator's view of the fleet's
 * breakers and the admin actions, against TEMPORAL_ADDRESS (`withClient` connects). Errors throw (the CLI
 * exits 2); an admin action sent but not yet confirmed exits EXIT_SENT_NOT_CONFIRMED (src/cli/breaker/confirm.ts).
 * Each subcommand is defined, with its action, in src/cli/breaker/.
 */
export function registerBreakerCommands(program: Command, withClient: WithClient): Command {
  const breaker = program
    .command('breaker')
    .description('list, inspect, force open / closed or reset the fleet-wide breakers at TEMPORAL_ADDRESS');
  // A usage error exits 2 (a JSON error under --json): the program's exitOverride and output settings, which
  // commands created from it inherit (src/cli/main.ts).
  registerBreakerList(breaker, withClient);
  registerBreakerShow(breaker, withClient);
  registerBreakerAdmin(breaker, withClient);
  registerBreakerConfigure(breaker, withClient);
  return breaker;
}
