import { hostname, userInfo } from 'node:os';
import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription } from '@temporalio/client';
import {
  breakerKey,
  type AdminSender,
  breakerWorkflowId,
  isCanonicalKey,
  parsePolicyConfig,
  permitFor,
  type BreakerStateName,
  type BreakerView,
  type Permit,
  type PolicyConfigInput,
  type TransitionRecord,
} from '../breaker';
import {
  adminSignal,
  statusQuery,
  transitionsQuery,
  type AdminAction,
  type BreakerStatus,
  type EntityExit,
  type EntityInput,
} from '../messages/breaker';
import { checkAdminAction, MAX_FORCE_OPEN_MS } from '../messages/breaker-validation';
import { BREAKER_KEY, BREAKER_STATE } from '../messages/search-attributes';

/**
 * Operator-side access to the fleet's breakers (the `tilebreaker breaker ...` commands): list the running
 * entities, show one, and force one open or closed or reset it. Everything here goes through a plain
 * @temporalio/client Client: no worker is needed, except that the entity's own workers must be running for
 * queries (status, transitions) to be answered.
 */

/** The entity workflow's type name, as the worker registers it. */
export const BREAKER_WORKFLOW_TYPE = 'breakerEntityWorkflow';

export const BREAKER_STATES: readonly BreakerStateName[] = [
  'closed',
  'open',
  'half-open',
  'forced-open',
  'forced-closed',
  'metrics-only',
];

/** How long to wait for an entity to answer a query before saying that it did not. */
const QUERY_TIMEOUT_MS = 10_000;

export interface ResolvedKey {
  key: string;
  workflowId: string;
  /** What the user typed. */
  input: string;
  /** Whether the key was given as such or derived from an endpoint URL. */
  from: 'key' | 'url';
}

/**
 * A breaker key from what a user typed: a canonical key as `breaker list` prints it
 * (`https://tiles.example.com:443`, optionally `/<partition>`, or a named key such as `geocoder:primary`), the
 * entity's workflow id (`breaker/<key>`), or
 * an endpoint URL (`https://Tiles.Example.com/osm/{z}/{x}/{y}.png`), whose key is derived with breakerKey.
 * With `partition`, the input is an endpoint URL (or key) and the partition is added.
 */
export function resolveBreakerKey(input: string, opts: { partition?: string } = {}): ResolvedKey {
  const text = input.trim().replace(/^breaker\//, '');
  if (opts.partition !== undefined) {
    const key = breakerKey(text, { partition: opts.partition });
    return { key, workflowId: breakerWorkflowId(key), input, from: 'url' };
  }
  if (isCanonicalKey(text)) return { key: text, workflowId: breakerWorkflowId(text), input, from: 'key' };
  let key: string;
  try {
    key = breakerKey(text);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(
      `not a breaker key or an endpoint URL: ${JSON.stringify(input)} (${why}). ` +
        'A key looks like https://tiles.example.com:443, http://wms.example.com:8080/roads or geocoder:primary, as "tilebreaker breaker list" prints it.',
      { cause: err },
    );
  }
  return { key, workflowId: breakerWorkflowId(key), input, from: 'url' };
}

function toResolved(keyOrUrl: string | ResolvedKey): ResolvedKey {
  return typeof keyOrUrl === 'string' ? resolveBreakerKey(keyOrUrl) : keyOrUrl;
}

/** No entity (running or finished) has this key's workflow id. */
export class BreakerNotFoundError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    readonly namespace: string,
    hint = '',
  ) {
    super(
      `no breaker entity for key ${key}: workflow id "${workflowId}" not found in namespace "${namespace}". ` +
        `An entity is created by the first outcome a guard reports for the key; "tilebreaker breaker list" lists the running ones.${hint}`,
    );
    this.name = 'BreakerNotFoundError';
  }
}

/** The entity exists but is not running (it finished idle, or was terminated): there is nothing to signal. */
export class BreakerNotRunningError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    readonly status: string,
    readonly closeTime: Date | undefined,
  ) {
    super(
      `breaker ${key} (workflow "${workflowId}") is not running: its latest run is ${status}` +
        `${closeTime ? ` since ${closeTime.toISOString()}` : ''}` +
        (status === 'COMPLETED' ? ' (a closed breaker with no reports finishes; the next report starts it again)' : ''),
    );
    this.name = 'BreakerNotRunningError';
  }
}

export interface ListedBreaker {
  key: string;
  workflowId: string;
  runId: string;
  /** From the BreakerState search attribute, else from the memo's view; null when neither is there yet. */
  state: BreakerStateName | null;
  stateFrom: 'search-attribute' | 'memo' | null;
  /** The compact view the entity keeps in its memo (cooldown end, timed force-open end, probes), when there. */
  view: BreakerView | null;
  startTime: Date;
  taskQueue: string;
}

export interface ListResult {
  breakers: ListedBreaker[];
  /** The visibility query sent. */
  query: string;
  /**
   * How a state filter was applied: by the server (BreakerState), or here from the memo because the
   * namespace does not have BreakerState registered.
   */
  filteredBy: 'search-attribute' | 'memo' | null;
}

/**
 * The running breaker entities, by visibility query (eventually consistent: an entity started a moment ago
 * may not be listed yet). `state` filters by BreakerState.
 */
export async function listBreakers(client: Client, opts: { state?: string } = {}): Promise<ListResult> {
  const states = opts.state === undefined ? undefined : statesMeant(checkState(opts.state));
  const base = `WorkflowType = '${BREAKER_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'`;
  const query = states
    ? `${base} AND ${states.length > 1 ? `(${states.map((s) => `BreakerState = "${s}"`).join(' OR ')})` : `BreakerState = "${states[0]!}"`}`
    : base;
  try {
    return { breakers: await collect(client, query), query, filteredBy: states ? 'search-attribute' : null };
  } catch (err) {
    // A namespace without BreakerState registered rejects the query: filter by the memo's view instead.
    if (!states || !/BreakerState/.test(err instanceof Error ? err.message : String(err))) throw err;
    const all = await collect(client, base);
    return {
      breakers: all.filter((b) => b.state !== null && states.includes(b.state)),
      query: base,
      filteredBy: 'memo',
    };
  }
}

/**
 * The states a `state` filter takes in: `open` includes `forced-open` (an operator's open refuses the fleet's calls
 * as much, and a list of what is open must not leave it out); every other state is itself alone.
 */
export function statesMeant(state: BreakerStateName): BreakerStateName[] {
  return state === 'open' ? ['open', 'forced-open'] : [state];
}

async function collect(client: Client, query: string): Promise<ListedBreaker[]> {
  const out: ListedBreaker[] = [];
  for await (const wf of client.workflow.list({ query })) {
    const view = asView(wf.memo?.['view']);
    const fromAttribute = wf.typedSearchAttributes.get(BREAKER_STATE);
    const state = (fromAttribute as BreakerStateName | undefined) ?? view?.state ?? null;
    out.push({
      key: wf.typedSearchAttributes.get(BREAKER_KEY) ?? wf.workflowId.replace(/^breaker\//, ''),
      workflowId: wf.workflowId,
      runId: wf.runId,
      state,
      stateFrom: fromAttribute !== undefined ? 'search-attribute' : view ? 'memo' : null,
      view,
      startTime: wf.startTime,
      taskQueue: wf.taskQueue,
    });
  }
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

function checkState(state: string): BreakerStateName {
  if (!(BREAKER_STATES as readonly string[]).includes(state)) {
    throw new Error(`breaker state must be one of ${BREAKER_STATES.join(', ')} (got ${JSON.stringify(state)})`);
  }
  return state as BreakerStateName;
}

function asView(v: unknown): BreakerView | null {
  return v && typeof v === 'object' && typeof (v as BreakerView).state === 'string' ? (v as BreakerView) : null;
}

export type ShownBreaker =
  | {
      running: true;
      key: string;
      workflowId: string;
      runId: string;
      taskQueue: string;
      startTime: Date;
      status: BreakerStatus;
      /** What a worker would be told now (by this machine's clock), from the entity's view. */
      permitNow: Permit;
      /** Most recent first. */
      transitions: TransitionRecord[];
    }
  | {
      running: false;
      key: string;
      workflowId: string;
      runId: string;
      taskQueue: string;
      startTime: Date;
      /** The latest run's status: COMPLETED (finished idle, closed), TERMINATED, FAILED, ... */
      executionStatus: string;
      closeTime: Date | null;
      /** A run that finished idle returns its transition log (most recent first); others: empty. */
      transitions: TransitionRecord[];
    };

/**
 * One breaker in full: the `status` and `transitions` queries of its entity (`limit`: at most this many
 * transitions, most recent first). An entity that finished (idle) is shown from its result.
 */
export async function showBreaker(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  opts: { limit?: number } = {},
): Promise<ShownBreaker> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  const handle = client.workflow.getHandle(resolved.workflowId);
  const common = {
    key: resolved.key,
    workflowId: resolved.workflowId,
    runId: d.runId,
    taskQueue: d.taskQueue,
    startTime: d.startTime,
  };
  if (d.status.name !== 'RUNNING') {
    let transitions: TransitionRecord[] = [];
    if (d.status.name === 'COMPLETED') {
      const exit = (await handle.result()) as EntityExit;
      transitions = (exit.transitions ?? []).slice(0, opts.limit);
    }
    return { running: false, ...common, executionStatus: d.status.name, closeTime: d.closeTime ?? null, transitions };
  }
  // One query at a time: a second query sent while the first waits on a workflow task sits out a server-side
  // retry (about 1.7 s on a dev server).
  const [status, transitions] = await queryEntity(
    client,
    resolved,
    d,
    async () =>
      [
        await handle.query(statusQuery),
        opts.limit === undefined
          ? await handle.query(transitionsQuery)
          : await handle.query(transitionsQuery, opts.limit),
      ] as const,
  );
  return { running: true, ...common, status, permitNow: permitFor(status.view, Date.now()), transitions };
}

/** A running breaker's full status (its entity's `status` query): view, permit, figures, configuration, probes, counters. */
export async function breakerStatus(client: Client, keyOrUrl: string | ResolvedKey): Promise<BreakerStatus> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  if (d.status.name !== 'RUNNING')
    throw new BreakerNotRunningError(resolved.key, resolved.workflowId, d.status.name, d.closeTime);
  const handle = client.workflow.getHandle(resolved.workflowId);
  return queryEntity(client, resolved, d, () => handle.query(statusQuery));
}

/**
 * A breaker's transition log, most recent first (at most `limit`): its entity's `transitions` query, or for an
 * entity that finished idle the log its run returned (none for a run that was terminated or failed).
 */
export async function breakerTransitions(
  client: Client,
  keyOrUrl: string | ResolvedKey,
  opts: { limit?: number } = {},
): Promise<TransitionRecord[]> {
  const resolved = toResolved(keyOrUrl);
  const d = await describeEntity(client, resolved);
  const handle = client.workflow.getHandle(resolved.workflowId);
  if (d.status.name !== 'RUNNING') {
    if (d.status.name !== 'COMPLETED') return [];
    const exit = (await handle.result()) as EntityExit;
    return (exit.transitions ?? []).slice(0, opts.limit);
  }
  return queryEntity(client, resolved, d, () =>
    opts.limit === undefined ? handle.query(transitionsQuery) : handle.query(transitionsQuery, opts.limit),
  );
}

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

/** How long an admin action waits, after its signal, for the entity to show its effect (adminBreaker's `confirmTimeoutMs`). */
export const DEFAULT_CONFIRM_TIMEOUT_MS = 10_000;

/**
 * An admin signal the server accepted, whose effect could not be read back before `confirmTimeoutMs`: the
 * entity answered no status query in time (under load its workflow tasks wait their turn). The signal is in the
 * entity's history: it takes effect when the entity's next workflow task runs, without being sent again.
 * (When the status was read but does not show the action yet, adminBreaker returns `confirmed: false` instead.)
 */
export class AdminNotConfirmedError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    /** force-open, force-close, reset or configure. */
    readonly action: string,
    /** When the signal was sent (this machine's clock). */
    readonly sentAt: number,
    /** Why it is not confirmed: the read-back's last failure. */
    readonly why: string,
  ) {
    super(
      `the ${action} signal was sent to breaker ${key} (workflow "${workflowId}") and accepted by the server, but is not yet confirmed: ${why}`,
    );
    this.name = 'AdminNotConfirmedError';
  }
}

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
  opts: { reason?: string; durationMs?: number; actor?: string; confirmTimeoutMs?: number; taskQueue?: string } = {},
): Promise<AdminResult> {
  if (opts.durationMs !== undefined) {
    if (action !== 'force-open')
      throw new Error(`a duration goes with force-open only (got ${action} with durationMs ${opts.durationMs})`);
    if (!Number.isSafeInteger(opts.durationMs) || opts.durationMs <= 0 || opts.durationMs > MAX_FORCE_OPEN_MS) {
      throw new Error(
        `durationMs must be a whole number of ms from 1 to ${MAX_FORCE_OPEN_MS} (30 days) (got ${opts.durationMs})`,
      );
    }
  }
  const resolved = toResolved(keyOrUrl);
  const actor = opts.actor ?? defaultActor();
  const sender = adminSender(client);
  const signal: AdminAction & { actor: string; sender: AdminSender } =
    action === 'force-open'
      ? {
          action,
          actor,
          sender,
          ...(opts.reason ? { reason: opts.reason } : {}),
          ...(opts.durationMs !== undefined ? { durationMs: opts.durationMs } : {}),
        }
      : { action, actor, sender, ...(opts.reason ? { reason: opts.reason } : {}) };
  const expected: BreakerStateName =
    action === 'force-open' ? 'forced-open' : action === 'force-close' ? 'forced-closed' : 'closed';
  const reasonName = action === 'force-open' ? 'forced-open' : action === 'force-close' ? 'forced-close' : 'reset';
  const start = opts.taskQueue !== undefined ? { taskQueue: opts.taskQueue, input: { key: resolved.key } } : undefined;
  const { sentAt, status, transition, confirmed } = await sendAdmin(
    client,
    resolved,
    signal,
    opts.confirmTimeoutMs,
    start,
    (status, ours) => {
      const transition = ours.find((t) => t.reason === reasonName) ?? null;
      // A force-open or force-close of a breaker already in that mode records no transition; a reset always does.
      const confirmed =
        action === 'reset'
          ? transition !== null
          : status.view.state === expected || (action === 'force-open' && transition !== null);
      return { transition, confirmed };
    },
  );
  return {
    key: resolved.key,
    workflowId: resolved.workflowId,
    action,
    actor,
    sender,
    expected,
    sentAt,
    status,
    transition,
    confirmed,
  };
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
  const start = opts.taskQueue !== undefined ? { taskQueue: opts.taskQueue, input: { key: resolved.key } } : undefined;
  const { sentAt, status, transition, confirmed } = await sendAdmin(
    client,
    resolved,
    { action: 'configure', config, actor, sender },
    opts.confirmTimeoutMs,
    start,
    (_, ours) => {
      const transition = ours.find((t) => t.reason === 'configured') ?? null;
      return { transition, confirmed: transition !== null };
    },
  );
  return {
    key: resolved.key,
    workflowId: resolved.workflowId,
    config,
    actor,
    sender,
    sentAt,
    status,
    transition,
    confirmed,
  };
}

/** How far the server's clock may lag this process's when telling this action's transitions from older ones. */
const CLOCK_SKEW_MS = 30_000;
/** The least time a read-back query is given, even when the confirmation's deadline is closer. */
const MIN_QUERY_MS = 500;

/**
 * Sends an admin signal, then reads the entity's status and newest transitions back until `check` says the
 * action shows or `confirmTimeoutMs` (default 10 s) has passed since the signal. The signal is the first call to
 * the server, with nothing read before it: an emergency force-open must not wait on anything but the server
 * (queries need the entity's workflow task, which waits its turn on a loaded worker; a signal only needs the
 * server). With `start`, it goes by signal-with-start, which also starts an entity for a key that has none.
 * `check` sees the transitions this signal's actor and sender recorded since it was sent, most recent first.
 */
async function sendAdmin(
  client: Client,
  resolved: ResolvedKey,
  signal: AdminAction & { actor: string; sender: AdminSender },
  confirmTimeoutMs: number | undefined,
  start: { taskQueue: string; input: EntityInput } | undefined,
  check: (
    status: BreakerStatus,
    ours: TransitionRecord[],
  ) => { transition: TransitionRecord | null; confirmed: boolean },
): Promise<{ sentAt: number; status: BreakerStatus; transition: TransitionRecord | null; confirmed: boolean }> {
  const { action, actor, sender } = signal;
  // Checked as the entity checks it (it would refuse the signal whole): the error names the field and value.
  checkAdminAction(signal);
  const handle = client.workflow.getHandle(resolved.workflowId);
  const sentAt = Date.now();
  try {
    if (start) {
      // A breaker can be opened ahead of a maintenance window, before any worker has reported on it; an entity
      // that finished idle starts again.
      await client.workflow.signalWithStart(BREAKER_WORKFLOW_TYPE, {
        workflowId: resolved.workflowId,
        taskQueue: start.taskQueue,
        args: [start.input],
        signal: adminSignal,
        signalArgs: [signal],
      });
    } else {
      await handle.signal(adminSignal, signal);
    }
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    // Nothing running to signal: say whether there is no entity at all or one that ended, and how.
    const d = await describeEntity(client, resolved);
    throw new BreakerNotRunningError(resolved.key, resolved.workflowId, d.status.name, d.closeTime);
  }

  // The signal is in: from here on nothing throws but "not yet confirmed".
  const deadline = sentAt + (confirmTimeoutMs ?? DEFAULT_CONFIRM_TIMEOUT_MS);
  for (;;) {
    try {
      const [status, recent] = await client.withDeadline(
        Math.max(deadline, Date.now() + MIN_QUERY_MS),
        async () => [await handle.query(statusQuery), await handle.query(transitionsQuery, 20)] as const,
      );
      // This action's transitions: by its actor and sender, recorded since it was sent (a worker from before
      // senders were recorded: by the actor in the detail).
      const ours = recent.filter(
        (t) =>
          t.at >= sentAt - CLOCK_SKEW_MS &&
          (t.sender
            ? t.actor === actor && t.sender.identity === sender.identity && t.sender.host === sender.host
            : t.detail.includes(actor)),
      );
      const { transition, confirmed } = check(status, ours);
      if (confirmed || Date.now() >= deadline) return { sentAt, status, transition, confirmed };
    } catch (err) {
      if (Date.now() >= deadline) {
        const why = err instanceof Error ? err.message : String(err);
        const waited = ((Date.now() - sentAt) / 1000).toFixed(1);
        throw new AdminNotConfirmedError(
          resolved.key,
          resolved.workflowId,
          action,
          sentAt,
          `the entity answered no status query within ${waited} s of the signal (${why})`,
        );
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function describeEntity(client: Client, resolved: ResolvedKey): Promise<WorkflowExecutionDescription> {
  try {
    const d = await client.workflow.getHandle(resolved.workflowId).describe();
    if (d.type !== BREAKER_WORKFLOW_TYPE) {
      throw new Error(
        `workflow "${resolved.workflowId}" is a ${d.type}, not a breaker entity (${BREAKER_WORKFLOW_TYPE})`,
      );
    }
    return d;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    throw new BreakerNotFoundError(resolved.key, resolved.workflowId, client.options.namespace, notFoundHint(resolved));
  }
}

function notFoundHint(resolved: ResolvedKey): string {
  const hints: string[] = [];
  if (resolved.from === 'url') hints.push(`The key was derived from the URL ${JSON.stringify(resolved.input)}.`);
  const origin = /^(https?:\/\/[^/]+)\/.+$/.exec(resolved.key)?.[1];
  if (resolved.from === 'key' && origin) {
    hints.push(
      `If ${JSON.stringify(resolved.input)} is an endpoint URL rather than a key with a partition, its key is ${origin} (paths are not part of a key).`,
    );
  }
  return hints.length ? ` ${hints.join(' ')}` : '';
}

/** Runs entity queries under a deadline; a query nobody answers says which task queue has no worker. */
async function queryEntity<R>(
  client: Client,
  resolved: ResolvedKey,
  d: WorkflowExecutionDescription,
  fn: () => Promise<R>,
): Promise<R> {
  try {
    return await client.withDeadline(Date.now() + QUERY_TIMEOUT_MS, fn);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new BreakerNotFoundError(
        resolved.key,
        resolved.workflowId,
        client.options.namespace,
        notFoundHint(resolved),
      );
    const why = err instanceof Error ? err.message : String(err);
    const memo = asView(d.memo?.['view']);
    throw new Error(
      `breaker ${resolved.key} (workflow "${resolved.workflowId}") did not answer a query within ${QUERY_TIMEOUT_MS / 1000} s: ${why}. ` +
        `Queries need a worker polling its task queue "${d.taskQueue}"` +
        (memo ? `; its memo says ${memo.state}.` : '.'),
      { cause: err },
    );
  }
}
