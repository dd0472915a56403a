import type { Client } from '@temporalio/client';
import {
  parsePolicyConfig,
  type AdminSender,
  type BreakerStateName,
  type PolicyConfigInput,
  type TransitionRecord,
} from '../breaker';
import type { BreakerStatus, EntityInput } from '../messages/breaker';
import { MAX_FORCE_OPEN_MS } from '../messages/breaker-validation';
import { adminSender, defaultActor } from './breaker-actor';
import { sendAdmin, type SignedAdminAction } from './breaker-admin-signal';
import { BreakerNotFoundError, BreakerNotRunningError } from './breaker-errors';
import { toResolved, type ResolvedKey } from './breaker-keys';
import { breakerStatus } from './breaker-show';

export type BreakerAdminAction = 'force-open' | 'force-close' | 'reset';

export interface AdminResult {
  key: string;
  workflowId: string;
  action: BreakerAdminAction;
  /** The actor as given (free text: recorded as claimed). */
  actor: string;
  /** The sending process, as recorded beside the actor. */
  sender: AdminSender;
  /** The state the action leads to: forced-open, forced-closed, or closed after a reset. */
  expected: BreakerStateName;
  /** When the signal was sent (this machine's clock, ms since the epoch); the server had accepted it when this returned. */
  sentAt: number;
  /** The entity's status read back after the signal. */
  status: BreakerStatus;
  /** The transition the action recorded (none when the breaker was already in that mode, e.g. a second force-open). */
  transition: TransitionRecord | null;
  /** The status shows the action took effect (false: sent, and not yet confirmed by the time the read-back gave up). */
  confirmed: boolean;
}

/** adminBreaker's options. */
export interface AdminOptions {
  reason?: string;
  durationMs?: number;
  actor?: string;
  confirmTimeoutMs?: number;
  taskQueue?: string;
}

/** The state each action leads to, and the reason its transition records. */
const EXPECTED: Record<BreakerAdminAction, BreakerStateName> = {
  'force-open': 'forced-open',
  'force-close': 'forced-closed',
  reset: 'closed',
};
const REASON: Record<BreakerAdminAction, string> = {
  'force-open': 'forced-open',
  'force-close': 'forced-close',
  reset: 'reset',
};

/**
 * Sends an admin signal (`force-open`, optionally for `durationMs`; `force-close`; `reset`) to a running
 * entity (with `taskQueue`: to the key's entity, started by the signal where none runs), then reads its status
 * back until the action shows (up to `confirmTimeoutMs`, default 10 s, from the signal). Throws
 * AdminNotConfirmedError when the signal was accepted but the entity answered no status query in time.
 * The entity records `reason (by "actor", claimed; sent by <identity> as <user>@<host>)` as the transition's
 * detail, and the actor and sender as fields of the transition.
 */
export async function adminBreaker(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  action: BreakerAdminAction,
  opts: AdminOptions = {},
): Promise<AdminResult> {
  checkDuration(action, opts.durationMs);
  const resolved = toResolved(keyOrUrl);
  const actor = opts.actor ?? defaultActor();
  const sender = adminSender(client);
  const expected = EXPECTED[action];
  const reasonName = REASON[action];
  const { sentAt, status, transition, confirmed } = await sendAdmin({
    client,
    resolved,
    signal: adminSignalOf(action, actor, sender, opts),
    confirmTimeoutMs: opts.confirmTimeoutMs,
    start: startFor(resolved, opts.taskQueue),
    check: (status, ours) => {
      const transition = ours.find((t) => t.reason === reasonName) ?? null;
      // A force-open or force-close of a breaker already in that mode records no transition; a reset always does.
      const confirmed =
        action === 'reset'
          ? transition !== null
          : status.view.state === expected || (action === 'force-open' && transition !== null);
      return { transition, confirmed };
    },
  });
  const { key, workflowId } = resolved;
  return { key, workflowId, action, actor, sender, expected, sentAt, status, transition, confirmed };
}

/** A duration goes with force-open only, and is a whole number of ms up to MAX_FORCE_OPEN_MS. */
function checkDuration(action: BreakerAdminAction, durationMs: number | undefined): void {
  if (durationMs === undefined) return;
  if (action !== 'force-open')
    throw new Error(`a duration goes with force-open only (got ${action} with durationMs ${durationMs})`);
  if (!Number.isSafeInteger(durationMs) || durationMs <= 0 || durationMs > MAX_FORCE_OPEN_MS) {
    throw new Error(
      `durationMs must be a whole number of ms from 1 to ${MAX_FORCE_OPEN_MS} (30 days) (got ${durationMs})`,
    );
  }
}

/** The signal of an admin action: the reason when given, and a force-open's duration. */
function adminSignalOf(
  action: BreakerAdminAction,
  actor: string,
  sender: AdminSender,
  opts: AdminOptions,
): SignedAdminAction {
  return action === 'force-open'
    ? {
        action,
        actor,
        sender,
        ...(opts.reason ? { reason: opts.reason } : {}),
        ...(opts.durationMs !== undefined ? { durationMs: opts.durationMs } : {}),
      }
    : { action, actor, sender, ...(opts.reason ? { reason: opts.reason } : {}) };
}

/** With a task queue, the signal goes by signal-with-start, and starts the key's entity where none runs. */
function startFor(
  resolved: ResolvedKey,
  taskQueue: string | undefined,
): { taskQueue: string; input: EntityInput } | undefined {
  return taskQueue !== undefined ? { taskQueue, input: { key: resolved.key } } : undefined;
}

export interface ConfigureResult {
  key: string;
  workflowId: string;
  /** The fields sent (the entity keeps the others). */
  config: PolicyConfigInput;
  /** The actor as given (free text: recorded as claimed). */
  actor: string;
  /** The sending process, as recorded beside the actor. */
  sender: AdminSender;
  /** When the signal was sent (this machine's clock, ms since the epoch). */
  sentAt: number;
  /** The entity's status read back after the signal: `status.config` is the configuration now in force. */
  status: BreakerStatus;
  /** The `configured` transition the change recorded. */
  transition: TransitionRecord | null;
  /** The entity recorded the change. */
  confirmed: boolean;
}

/**
 * Changes fields of a running breaker's policy configuration (`configure`); fields not named keep their
 * values. The change is checked here first against the configuration the entity has now, so one the policy
 * would refuse throws a ConfigError naming the field and sends nothing. Then, as adminBreaker, it reads the
 * status back until the entity has recorded the change (`configured`, with the actor and sender).
 */
export async function configureBreaker(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  config: PolicyConfigInput,
  opts: { actor?: string; confirmTimeoutMs?: number; taskQueue?: string } = {},
): Promise<ConfigureResult> {
  const resolved = toResolved(keyOrUrl);
  // Checked against the configuration in force, or the defaults for an entity this call starts.
  const current = await breakerStatus(client, resolved).catch((err: unknown) => {
    if (opts.taskQueue !== undefined && (err instanceof BreakerNotFoundError || err instanceof BreakerNotRunningError))
      return null;
    throw err;
  });
  parsePolicyConfig({ ...(current?.config ?? {}), ...config });
  const actor = opts.actor ?? defaultActor();
  const sender = adminSender(client);
  const { sentAt, status, transition, confirmed } = await sendAdmin({
    client,
    resolved,
    signal: { action: 'configure', config, actor, sender },
    confirmTimeoutMs: opts.confirmTimeoutMs,
    start: startFor(resolved, opts.taskQueue),
    check: (_, ours) => {
      const transition = ours.find((t) => t.reason === 'configured') ?? null;
      return { transition, confirmed: transition !== null };
    },
  });
  const { key, workflowId } = resolved;
  return { key, workflowId, config, actor, sender, sentAt, status, transition, confirmed };
}
