/** The records of tiles the breaker stopped, and what the pipeline's fallback draws for them. */
import type { TileAddress } from '../../sources/request-url';
import { scrubSecrets } from '../../breaker/redact';
import type { GuardDecision } from '../guard';
import { redactUrl } from '../http/credentials';
import type { StoredTile, Tiles } from '../tile-store/tiles';
import type { Verdict } from '../validate/classify';
import type { FetchBatchInput, TileResult } from './batch-types';
import type { UnitCall } from './unit-call';

/** What the last failed request got, and where it went (credentials masked), for a record that goes on past it. */
export function lastReason(
  { source, secrets }: Pick<UnitCall, 'source' | 'secrets'>,
  v: Verdict,
  attempt: number,
  url: string,
): string {
  return scrubSecrets(`attempt ${attempt}: ${v.reason} (${redactUrl(url, source.auth)})`, secrets);
}

/**
 * A mirror's tile where it served one, else the primary's record. The mirror's record counts the primary's
 * requests too and keeps the breaker's part (the state that stopped the primary, a call it abandoned).
 */
export function servedOrRefused(mirror: TileResult | null | undefined, primary: TileResult): TileResult {
  if (!mirror) return primary;
  return {
    ...mirror,
    attempts: primary.attempts + mirror.attempts,
    ...(primary.breakerState !== undefined ? { breakerState: primary.breakerState } : {}),
    ...(primary.abandonedAfterMs !== undefined ? { abandonedAfterMs: primary.abandonedAfterMs } : {}),
  };
}

/**
 * The last good copies of the tiles no mirror served, read only when they are needed: under the stale
 * fallback, after the mirrors had their turn.
 */
export function staleCopies(
  { store, input, tiles }: Pick<UnitCall, 'store' | 'input' | 'tiles'>,
  mirrored: readonly (TileResult | null)[],
): Promise<(Awaited<ReturnType<Tiles['get']>> | null)[]> {
  if (input.whenRefused !== 'stale') return Promise.resolve([]);
  return Promise.all(tiles.map((t, k) => (mirrored[k] ? Promise.resolve(null) : store.get(input.sourceName, t))));
}

/** One tile the breaker stopped, and what its record needs. */
export interface RefusedTile {
  input: FetchBatchInput;
  tile: TileAddress;
  decision: Extract<GuardDecision, { kind: 'refused' }>;
  /** Its last good copy, for the stale fallback. */
  stored: StoredTile | null;
  attempts: number;
  made?: Pick<TileResult, 'kind' | 'httpStatus' | 'latencyMs' | 'abandonedAfterMs'>;
}

/**
 * A tile the breaker stopped: refused before a request (`made` empty), refused before a retry, or abandoned in
 * flight (`made`: what the last request made got). The pipeline's fallback applies either way.
 */
export function refused({ input, tile, decision: d, stored, attempts, made = {} }: RefusedTile): TileResult {
  const base = {
    ...tile,
    attempts,
    ...made,
    breakerState: d.state,
    ...(d.retryAfterMs !== null ? { retryAfterMs: d.retryAfterMs } : {}),
  };
  if (input.whenRefused === 'stale' && stored) {
    return {
      ...base,
      status: 'stale',
      reason: `${d.reason}; served the copy fetched ${new Date(stored.meta.fetchedAt).toISOString()}`,
      path: stored.path,
      bytes: stored.meta.bytes,
    };
  }
  if (input.whenRefused === 'hole')
    return { ...base, status: 'hole', reason: `${d.reason}; left as a hole (not rendered)` };
  return {
    ...base,
    status: 'deferred',
    reason: `${d.reason}${input.whenRefused === 'stale' ? '; no stored copy to serve' : ''}`,
  };
}
