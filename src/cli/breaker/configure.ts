import type { Command } from 'commander';
import { checkPolicyBounds } from '../../breaker';
import { configureBreaker, resolveBreakerKey, type ConfigureResult } from '../../client/breakers';
import { parseDuration } from '../duration-option';
import { notConfirmed, sentNotConfirmed } from './confirm';
import { formatTransitionLog } from './format';
import { confirmHelp, keyHelp, parseAssignments, partitionHelp, partitionOf, type WithClient } from './options';

interface ConfigureOptions {
  partition?: string;
  actor?: string;
  json?: boolean;
  confirmTimeout?: number;
}

/** `breaker configure KEY field=value...`: changes fields of a breaker's policy. */
export function registerBreakerConfigure(breaker: Command, withClient: WithClient): void {
  breaker
    .command('configure')
    .description(
      "change fields of a breaker's policy (e.g. maxRequestsPerSecond=20 cooldownMs=60000); the change stays until changed again, also across idle periods",
    )
    .argument('<key>', keyHelp)
    .argument('<field=value...>', 'policy fields to set (numbers, true/false, or null), the others keep their values')
    .option('--partition <name>', partitionHelp)
    .option('--actor <who>', 'who, for the transition log (recorded as claimed beside the sender)')
    .option('--json', 'print JSON')
    .option('--confirm-timeout <duration>', confirmHelp, parseDuration)
    .action((key: string, pairs: string[], opts: ConfigureOptions) => configureAction(withClient, key, pairs, opts));
}

async function configureAction(
  withClient: WithClient,
  key: string,
  pairs: string[],
  opts: ConfigureOptions,
): Promise<void> {
  const resolved = resolveBreakerKey(key, partitionOf(opts));
  const config = parseAssignments(pairs);
  // Out of the policy's bounds: refused here, before connecting (exit 2); the rest is checked against the
  // configuration in force (configureBreaker), and the entity checks both again.
  checkPolicyBounds(config, 'breaker configure');
  await withClient(async (client, taskQueue) => {
    const result = await notConfirmed(
      configureBreaker(client, resolved, config, {
        taskQueue,
        ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
        ...(opts.confirmTimeout !== undefined ? { confirmTimeoutMs: opts.confirmTimeout } : {}),
      }),
      resolved.key,
      !!opts.json,
    );
    if (!result) return;
    if (opts.json) console.log(JSON.stringify(result, null, 2));
    else printConfigured(result, config);
    if (!result.confirmed)
      sentNotConfirmed('configure', result.key, result.sentAt, 'the change does not show in its status yet');
  });
}

/** The fields set, as the breaker's status now reads them, and the transition recorded. */
function printConfigured(result: ConfigureResult, config: Record<string, unknown>): void {
  const changed = Object.keys(config)
    .map((k) => `${k}=${JSON.stringify((result.status.config as Record<string, unknown>)[k])}`)
    .join(' ');
  console.log(
    `breaker ${result.key}: configure ${result.confirmed ? 'done' : 'sent, NOT YET CONFIRMED'}; now ${changed}`,
  );
  if (result.transition) console.log(formatTransitionLog([result.transition]).join('\n'));
}
