import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription } from '@temporalio/client';
import type { BreakerView } from '../breaker';
import { BreakerNotFoundError } from './breaker-errors';
import { BREAKER_WORKFLOW_TYPE, type ResolvedKey } from './breaker-keys';

/** How long to wait for an entity to answer a query before saying that it did not. */
const QUERY_TIMEOUT_MS = 10_000;

/** The entity's view as its memo keeps it, or null when the memo holds none. */
export function asView(v: unknown): BreakerView | null {
  return v && typeof v === 'object' && typeof (v as BreakerView).state === 'string' ? (v as BreakerView) : null;
}

/** The key's entity as Temporal describes it; BreakerNotFoundError when there is none. */
export async function describeEntity(client: Client, resolved: ResolvedKey): Promise<WorkflowExecutionDescription> {
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
export async function queryEntity<R>(
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
