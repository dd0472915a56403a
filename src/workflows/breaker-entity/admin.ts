import type { AdminSender, PolicyEvent, TransitionReason, TransitionRecord } from '../../breaker';
import type { AdminAction } from '../../messages/breaker';
import type { Origin } from './state';

/** The admin actions that go through the policy (set-probe only changes the entity's probe spec). */
export type RecordedAdminAction = Exclude<AdminAction, { action: 'set-probe' }>;

/** The policy event an admin action sends, and the origin its transitions record. */
export function adminCommand(a: RecordedAdminAction): { event: PolicyEvent; origin: Origin } {
  return { event: adminEvent(a), origin: { reason: ADMIN_REASON[a.action], fields: adminOrigin(a) } };
}

/** The transition each admin action records. */
const ADMIN_REASON: Record<RecordedAdminAction['action'], TransitionReason> = {
  'force-open': 'forced-open',
  'force-close': 'forced-close',
  reset: 'reset',
  disable: 'disabled',
  enable: 'enabled',
  configure: 'configured',
};

/** The sender as the signal gave it, as strings whatever arrived (a handler must not throw), or none. */
function senderOf(a: AdminAction): AdminSender | undefined {
  const s: unknown = a.sender;
  if (!s || typeof s !== 'object') return undefined;
  const field = (name: keyof AdminSender) => {
    const v = (s as Record<string, unknown>)[name];
    return typeof v === 'string' && v ? v : '?';
  };
  return { identity: field('identity'), user: field('user'), host: field('host') };
}

/** The structured "who" a transition from this action carries: the claimed actor and the sender, when given. */
function adminOrigin(a: AdminAction): Pick<TransitionRecord, 'actor' | 'sender'> {
  const sender = senderOf(a);
  return { ...(a.actor !== undefined ? { actor: String(a.actor) } : {}), ...(sender ? { sender } : {}) };
}

/**
 * The transition detail's "who": the free-text actor always quoted and labelled as claimed (so it cannot pass
 * for anything else), then the sending process as its client reported it, when it did: `by "alice", claimed;
 * sent by 1234@host as root@host`. Neither is authenticated: who may signal at all is the server's to decide.
 */
function adminWho(a: AdminAction): string | undefined {
  const sender = senderOf(a);
  if (!sender) return a.actor ? `by ${JSON.stringify(String(a.actor))}, claimed` : undefined;
  const sent = `sent by ${sender.identity} as ${sender.user}@${sender.host}`;
  return a.actor ? `by ${JSON.stringify(String(a.actor))}, claimed; ${sent}` : sent;
}

function adminEvent(a: RecordedAdminAction): PolicyEvent {
  const who = adminWho(a);
  const reason = a.reason ? (who ? `${a.reason} (${who})` : a.reason) : who;
  const withReason = reason ? { reason } : {};
  switch (a.action) {
    case 'force-open':
      return { type: 'force-open', ...withReason, ...(a.durationMs !== undefined ? { durationMs: a.durationMs } : {}) };
    case 'configure':
      return { type: 'configure', config: a.config };
    case 'force-close':
    case 'reset':
    case 'disable':
    case 'enable':
      return { type: a.action, ...withReason };
    default:
      throw new Error(`unknown admin action ${JSON.stringify((a as { action?: unknown }).action)}`);
  }
}
