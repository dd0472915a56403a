import type { Client } from '@temporalio/client';
import type { BreakerStateName, BreakerView } from '../breaker';
import { BREAKER_KEY, BREAKER_STATE } from '../messages/search-attributes';
import { asView } from './breaker-entity';
import { BREAKER_WORKFLOW_TYPE } from './breaker-keys';

export const BREAKER_STATES: readonly BreakerStateName[] = [
  'closed',
  'open',
  'half-open',
  'forced-open',
  'forced-closed',
  'metrics-only',
];

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
