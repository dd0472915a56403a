import { breakerKey, breakerWorkflowId, isCanonicalKey } from '../breaker';

/** The entity workflow's type name, as the worker registers it. */
export const BREAKER_WORKFLOW_TYPE = 'breakerEntityWorkflow';

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

/** A key as resolveBreakerKey reads it, or one already resolved. */
export function toResolved(keyOrUrl: string | ResolvedKey): ResolvedKey {
  return typeof keyOrUrl === 'string' ? resolveBreakerKey(keyOrUrl) : keyOrUrl;
}
