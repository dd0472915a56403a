import { hostname, userInfo } from 'node:os';
import type { Client } from '@temporalio/client';
import type { AdminSender } from '../breaker';

/** The OS user this process runs as. */
function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    // No passwd entry (containers): the environment's answer.
    return process.env['USER'] ?? process.env['USERNAME'] ?? 'unknown';
  }
}

/** The default actor recorded with an admin action: `cli:<user>@<host>`. */
export function defaultActor(): string {
  return `cli:${osUser()}@${hostname()}`;
}

/**
 * Who sends an admin signal from this process, whatever `--actor` says: the client's identity as it reports
 * itself to the server (@temporalio/client's default is `<pid>@<host>`), and the OS user and host. The
 * entity records it beside the actor, which it labels as claimed.
 */
export function adminSender(client: Client): AdminSender {
  return { identity: client.options.identity, user: osUser(), host: hostname() };
}
