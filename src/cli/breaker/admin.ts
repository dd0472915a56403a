import type { Command } from 'commander';
import { adminBreaker, resolveBreakerKey, type BreakerAdminAction } from '../../client/breakers';
import { parseDuration } from '../duration-option';
import { notConfirmed, sentNotConfirmed } from './confirm';
import { formatAdmin } from './format';
import { confirmHelp, keyHelp, parseForceOpenFor, partitionHelp, partitionOf, type WithClient } from './options';

/** An admin command: the name typed, the signal it sends and its help. */
interface AdminCommand {
  name: string;
  action: BreakerAdminAction;
  description: string;
}

interface AdminOptions {
  partition?: string;
  reason?: string;
  actor?: string;
  json?: boolean;
  for?: number;
  confirmTimeout?: number;
}

/** `breaker open | close | force-close | reset`. */
export function registerBreakerAdmin(breaker: Command, withClient: WithClient): void {
  // `close` is "back to normal": automatic closed, as `reset` (it trips again on failures). Forcing closed, so
  // that it never trips, is a command of its own, `force-close`: a breaker left forced closed after a
  // maintenance window no longer protects the endpoint, which `close` made easy to miss.
  const commands: AdminCommand[] = [
    {
      name: 'open',
      action: 'force-open',
      description:
        'force a breaker open: the fleet stops calling the endpoint (optionally for a duration) until `breaker close` or `reset`',
    },
    {
      name: 'close',
      action: 'reset',
      description:
        'close a breaker: back to automatic, closed with an empty window (ends a forced open or forced closed); it trips again on failures. The same as reset',
    },
    {
      name: 'force-close',
      action: 'force-close',
      description:
        'force a breaker closed: the fleet calls the endpoint whatever its failures; it never trips until `breaker reset` (or `close`)',
    },
    {
      name: 'reset',
      action: 'reset',
      description:
        'reset a breaker to closed in automatic mode, with an empty window (ends a forced state); the same as close',
    },
  ];
  for (const command of commands) registerAdminCommand(breaker, withClient, command);
}

/** One admin command: its options (`open` takes --for) and its action. */
function registerAdminCommand(breaker: Command, withClient: WithClient, command: AdminCommand): void {
  const cmd = breaker
    .command(command.name)
    .description(command.description)
    .argument('<key>', keyHelp)
    .option('--partition <name>', partitionHelp)
    .option('--reason <text>', 'why (recorded in the transition log with the actor and the sender)')
    .option(
      '--actor <who>',
      'who, for the transition log, where it is labelled as claimed beside the sender this process reports (its Temporal client identity, OS user and host) (default cli:<user>@<host>)',
    )
    .option('--json', 'print JSON');
  if (command.action === 'force-open') {
    cmd.option(
      '--for <duration>',
      'open for this long, at most 30d, then test recovery in half-open (e.g. 90s, 10m, 1h30m; default: until closed or reset)',
      parseForceOpenFor,
    );
  }
  cmd.option('--confirm-timeout <duration>', confirmHelp, parseDuration);
  cmd.action((key: string, opts: AdminOptions) => adminAction(withClient, command, key, opts));
}

/** Sends the admin signal, then reads the breaker back and says what it shows. */
async function adminAction(
  withClient: WithClient,
  { name, action }: AdminCommand,
  key: string,
  opts: AdminOptions,
): Promise<void> {
  const resolved = resolveBreakerKey(key, partitionOf(opts));
  await withClient(async (client, taskQueue) => {
    // The signal goes first; a key with no running entity gets one (a breaker can be opened before a
    // maintenance window). The read-back follows.
    const result = await notConfirmed(
      adminBreaker(client, resolved, action, {
        taskQueue,
        ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
        ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
        ...(opts.for !== undefined ? { durationMs: opts.for } : {}),
        ...(opts.confirmTimeout !== undefined ? { confirmTimeoutMs: opts.confirmTimeout } : {}),
      }),
      resolved.key,
      !!opts.json,
      name,
    );
    if (!result) return;
    // `command`: the command typed (`close` sends a reset), beside `action`, the signal sent.
    console.log(
      opts.json ? JSON.stringify({ command: name, ...result }, null, 2) : formatAdmin(result, Date.now(), name),
    );
    if (!result.confirmed) {
      sentNotConfirmed(
        action,
        result.key,
        result.sentAt,
        `its status still reads ${result.status.view.state} (expected ${result.expected})`,
      );
    }
  });
}
