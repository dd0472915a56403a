import {
  ActivityCancelledError,
  ActivityNotFoundError,
  ActivityPausedError,
  ActivityResetError,
} from '@temporalio/client';
import type { Context } from '@temporalio/activity';

/** What the server made of one heartbeat sent to it. */
export type HeartbeatAnswer = 'accepted' | 'gone' | 'unanswered';

/** Sends a heartbeat with `details` to the server and says what became of it. */
export type ConfirmHeartbeat = (details: unknown) => Promise<HeartbeatAnswer>;

/**
 * Whether this attempt still holds its batch. The SDK gives an activity no word of its heartbeats' fate, and
 * its worker-side heartbeat timer is reset by every report that completes, failed ones included: a worker cut
 * off from Temporal keeps its attempts running while the server times them out and hands their batches to
 * retries. So a batch also sends its heartbeat itself, every third of its heartbeat timeout, and counts it
 * accepted only when the server answers; once none has been accepted for the whole timeout (from when it was
 * sent, so never later than the server's own clock), or the server no longer knows the attempt, the attempt is
 * lost: it starts no request, as a retry may already run.
 */
export class HeartbeatLease {
  private acceptedAt: number;
  private sentAt = -Infinity;
  private sending = false;
  private gone = false;
  private gaveUp: string | null = null;

  constructor(
    readonly timeoutMs: number,
    private readonly confirm: ConfirmHeartbeat,
    private readonly now: () => number,
  ) {
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0))
      throw new RangeError(`heartbeat lease: timeoutMs must be a number of ms > 0 (got ${timeoutMs})`);
    // The server has just handed this attempt out.
    this.acceptedAt = now();
  }

  /** Sends `details` unless one was sent within a third of the timeout or is still on its way. */
  beat(details: unknown): void {
    const at = this.now();
    if (this.gone || this.sending || at - this.sentAt < this.timeoutMs / 3) return;
    this.sending = true;
    this.sentAt = at;
    this.confirm(details)
      .then(
        (answer) => {
          if (answer === 'accepted') this.acceptedAt = Math.max(this.acceptedAt, at);
          else if (answer === 'gone') this.gone = true;
        },
        () => undefined,
      )
      .finally(() => {
        this.sending = false;
      });
  }

  /** Why this attempt no longer holds its batch, or null while it does. Final: a lost attempt stays lost. */
  lost(): string | null {
    if (this.gaveUp !== null) return this.gaveUp;
    const silent = this.now() - this.acceptedAt;
    if (this.gone) this.gaveUp = 'the server no longer knows this attempt (timed out, or its workflow closed)';
    else if (silent > this.timeoutMs)
      this.gaveUp = `no heartbeat accepted by the server for ${(silent / 1000).toFixed(1)} s (heartbeat timeout ${(this.timeoutMs / 1000).toFixed(1)} s)`;
    return this.gaveUp;
  }
}

/**
 * The lease of the running attempt, sent through its worker's client; none outside a worker, for an activity
 * without a heartbeat timeout, or where the context has no client (a test's mock environment without one).
 */
export function attemptLease(ctx: Context | undefined, now: () => number): HeartbeatLease | null {
  const timeoutMs = ctx?.info.heartbeatTimeoutMs;
  if (!ctx || ctx.info.isLocal || !timeoutMs) return null;
  let client: Context['client'];
  try {
    client = ctx.client;
  } catch {
    return null;
  }
  const token = ctx.info.taskToken;
  const confirm: ConfirmHeartbeat = async (details) => {
    try {
      // A server that does not answer within half the timeout is not counted on; the next beat asks again.
      await client.withDeadline(Date.now() + timeoutMs / 2, () => client.activity.heartbeat(token, details));
      return 'accepted';
    } catch (err) {
      if (err instanceof ActivityNotFoundError) return 'gone';
      // Cancelled, paused, reset: the server recorded the heartbeat, and the SDK delivers the cancel.
      if (
        err instanceof ActivityCancelledError ||
        err instanceof ActivityPausedError ||
        err instanceof ActivityResetError
      )
        return 'accepted';
      return 'unanswered';
    }
  };
  return new HeartbeatLease(timeoutMs, confirm, now);
}
