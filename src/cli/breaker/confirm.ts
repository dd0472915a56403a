// An admin action (open, close, force-close, reset, configure) that was sent but not yet confirmed.
import { AdminNotConfirmedError } from '../../client/breakers';
import { iso } from './format';

/**
 * The exit code of an admin action (open, close, reset, configure) that was sent, and accepted by the server,
 * but not yet confirmed by the entity: distinct from 2 (could not run: nothing was sent). docs/cli.md.
 */
export const EXIT_SENT_NOT_CONFIRMED = 5;

/**
 * An admin action's result, or undefined when it was sent but the entity answered no status query in time:
 * then it says so (as JSON with --json) and sets the exit code. Any other error (nothing was sent) throws.
 */
export async function notConfirmed<R>(
  action: Promise<R>,
  key: string,
  json: boolean,
  command?: string,
): Promise<R | undefined> {
  try {
    return await action;
  } catch (err) {
    if (!(err instanceof AdminNotConfirmedError)) throw err;
    if (json) {
      const { action: name, workflowId, sentAt, why } = err;
      console.log(
        JSON.stringify(
          {
            ...(command !== undefined ? { command } : {}),
            key,
            workflowId,
            action: name,
            sent: true,
            sentAt,
            confirmed: false,
            why,
          },
          null,
          2,
        ),
      );
    }
    sentNotConfirmed(err.action, key, err.sentAt, err.why);
    return undefined;
  }
}

/**
 * Says that an admin signal went out and the server accepted it, but its effect is not confirmed yet, and what
 * to do; exits EXIT_SENT_NOT_CONFIRMED. The signal is in the entity's history: it applies it at its next
 * workflow task without being sent again.
 */
export function sentNotConfirmed(action: string, key: string, sentAt: number, why: string): void {
  console.error(
    `tilebreaker: ${action} of breaker ${key} SENT, NOT YET CONFIRMED: the server accepted the signal at ${iso(sentAt)}, but ${why}. ` +
      `The breaker applies it at its next workflow task, without it being sent again; \`tilebreaker breaker show ${key}\` shows when it has. Sending it again does no harm.`,
  );
  process.exitCode = EXIT_SENT_NOT_CONFIRMED;
}
