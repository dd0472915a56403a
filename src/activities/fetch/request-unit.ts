/**
 * One unit's request, attempt after attempt: each answer classified, retried as the policy allows, stored when
 * good; the breaker's refusals and the failures a later attempt may cure go to the mirrors and the pipeline's
 * fallback.
 */
import { scrubSecrets } from '../../breaker/redact';
import type { TileAddress } from '../../sources/request-url';
import type { GuardDecision } from '../guard';
import { redactUrl } from '../http/credentials';
import type { HttpExchange } from '../http/fetch-url';
import { StoreEscapeError } from '../tile-store/store-bounds';
import type { Verdict } from '../validate/classify';
import { CURABLE_KINDS, sourceBreakerKey, type FetchBatchInput, type TileResult } from './batch-types';
import { countNotModified, judgeAnswer, keptWhole } from './judge-answer';
import { requestUnits } from './metatiles';
import { lastReason, refused, servedOrRefused, staleCopies, type RefusedTile } from './refusal';
import { backoffMs, retryable } from './retry-policy';
import { sendRequest, type Admitted } from './send-request';
import { sleep } from './sleep';
import { storeChunk, storeNotModified, storeTiles } from './store-tiles';
import { openUnitCall, type UnitCall, type UnitRequest } from './unit-call';

/**
 * One unit's results. A tile store path that leads outside the store (a symlinked folder or tile) fails the
 * unit's tiles with the refusal, requests counted: recorded like any failure, never a lost batch.
 */
export async function fetchUnit(req: UnitRequest): Promise<TileResult[] | null> {
  const { tried } = req;
  try {
    return await requestUnit(req);
  } catch (err) {
    if (!(err instanceof StoreEscapeError)) throw err;
    const { input, unit } = req;
    return unit.members.map((i) => ({
      ...input.tiles[i]!,
      status: 'failed',
      kind: 'permanent',
      reason: err.message,
      attempts: tried.made,
    }));
  }
}

/** One unit's results, one per member tile; null when cancelled (its tiles stay unfinished). */
async function requestUnit(req: UnitRequest): Promise<TileResult[] | null> {
  const call = await openUnitCall(req);
  const { deps, policy, signal } = call;
  let verdict: Verdict | null = null;
  let url = call.unit.url;
  // Calls sent again at once after the server dropped them unanswered: requests too, in `attempts`.
  const resends = { count: 0 };
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    const sent = await sendRequest({ call, attempt, resends });
    if (sent.outcome === 'no-credential') return call.tiles.map((t) => noCredential(t, sent.message));
    if (sent.outcome === 'cancelled') return null;
    url = sent.url;
    if (sent.outcome === 'refused')
      return refusedAttempt({ call, decision: sent.decision, last: verdict, attempt, url });
    const { decision, x, shed } = sent;
    if (signal?.aborted) {
      // Our own abort is not the endpoint's failure: report nothing, and leave the tiles unfinished.
      if (decision) deps.guard!.abandon(decision);
      return null;
    }
    if (shed?.aborted && decision) return abandoned({ call, decision, x, url, shed });
    if (x.status === 304 && call.conditional) {
      countNotModified({ call, sent });
      return storeNotModified({ call, x, stored: call.conditional });
    }
    verdict = await judgeAnswer({ call, sent });
    if (verdict.kind === 'success')
      return keptWhole(call) ? storeChunk({ call, x, verdict }) : storeTiles({ call, x, verdict });
    if (verdict.kind === 'neutral' && !verdict.configError) return holes(call, verdict);
    const tooLong = (verdict.retryAfterMs ?? 0) > policy.maxRetryAfterMs;
    if (!retryable(verdict.kind) || attempt === policy.attempts || tooLong || signal?.aborted) break;
    // Under the breaker a Retry-After is the guard's pause, the fleet's (waited out above, before the next
    // decision); without one, this call waits it out itself.
    const pausedByGuard = call.useBreaker && deps.guard!.waitOutPause !== undefined;
    await sleep(backoffMs(attempt - 1, policy, pausedByGuard ? 0 : (verdict.retryAfterMs ?? 0)), signal);
  }
  return failedAfterRetries(call, verdict!, url);
}

/** A tile whose credential is missing: the configuration's fault, with no request. */
function noCredential(t: TileAddress, message: string): TileResult {
  return { ...t, status: 'failed', kind: 'permanent', configError: true, attempts: 0, reason: message };
}

/** A neutral answer that is no configuration error (nothing there to render): its tiles are holes. */
function holes(call: UnitCall, v: Verdict): TileResult[] {
  return call.tiles.map((t) => ({
    ...t,
    status: 'hole',
    kind: 'neutral',
    reason: scrubSecrets(v.reason, call.secrets),
    attempts: call.tried.made,
    httpStatus: v.httpStatus,
  }));
}

/** An attempt the breaker refused, and the verdict of the attempt before it (null for the first). */
interface RefusedAttempt {
  call: UnitCall;
  decision: Extract<GuardDecision, { kind: 'refused' }>;
  last: Verdict | null;
  attempt: number;
  url: string;
}

/** The breaker refused an attempt: the unit's tiles are stopped, before their first request or a retry. */
function refusedAttempt({ call, decision, last, attempt, url }: RefusedAttempt): Promise<TileResult[] | null> {
  // A retry the breaker refused: the record keeps what the last request got, then the refusal.
  const d = last
    ? {
        ...decision,
        reason: `${lastReason(call, last, attempt - 1, url)}; attempt ${attempt} not sent: ${decision.reason}`,
      }
    : decision;
  const made = last ? { kind: last.kind, httpStatus: last.httpStatus, latencyMs: last.latencyMs } : {};
  return stoppedByBreaker({ call, decision: d, made });
}

/** A call in flight that the breaker abandoned when it opened, and what it had got. */
interface Abandoned {
  call: UnitCall;
  decision: Admitted;
  x: HttpExchange;
  url: string;
  shed: AbortSignal;
}

/** The breaker opened while the call stalled and abandoned it: its tiles are refused, the call counted made. */
function abandoned({ call, decision, x, url, shed }: Abandoned): Promise<TileResult[] | null> {
  // Counted while it stalled; now refused like any call the open breaker stops: the fallback applies.
  call.deps.guard!.abandon(decision);
  const why = shed.reason instanceof Error ? shed.reason.message : 'breaker open: the call stalled and was abandoned';
  const opened = {
    kind: 'refused' as const,
    key: call.key,
    state: 'open' as const,
    retryAfterMs: null,
    reason: scrubSecrets(
      `${why} after ${Math.round(x.latencyMs / 100) / 10} s (${redactUrl(url, call.source.auth)})`,
      call.secrets,
    ),
  };
  // Made, not refused: the breaker counted it as a stall (transient) and abandoned it when it opened.
  const made = {
    kind: 'transient' as const,
    httpStatus: x.status,
    latencyMs: x.latencyMs,
    abandonedAfterMs: Math.round(x.latencyMs),
  };
  return stoppedByBreaker({ call, decision: opened, made });
}

/** The unit's tiles the breaker stopped: the refusal, and what the tiles' last request made got (if any). */
interface Stopped {
  call: UnitCall;
  decision: RefusedTile['decision'];
  made: NonNullable<RefusedTile['made']>;
}

/** Tiles the breaker stopped: from the mirrors where one serves them, else the pipeline's fallback. */
async function stoppedByBreaker({ call, decision, made }: Stopped): Promise<TileResult[] | null> {
  const mirrored = await fromMirrors(call, decision.reason);
  if (mirrored === null) return null;
  const stored = await staleCopies(call, mirrored);
  return call.tiles.map((t, k) =>
    servedOrRefused(
      mirrored[k],
      refused({ input: call.input, tile: t, decision, stored: stored[k] ?? null, attempts: call.tried.made, made }),
    ),
  );
}

/**
 * The unit failed its last attempt (`v`, sent to `url`): every tile fails (a failed metatile fails every tile of
 * it, with the same reason), unless a later attempt may cure it and a mirror or a stored copy serves it meanwhile.
 */
async function failedAfterRetries(call: UnitCall, v: Verdict, url: string): Promise<TileResult[] | null> {
  const { source, secrets, tried } = call;
  const redacted = redactUrl(url, source.auth);
  // A failed metatile fails every tile of it, with the same reason.
  const failed = call.tiles.map((t): TileResult => ({
    ...t,
    status: v.kind === 'rate-limited' && v.retryAfterMs !== undefined ? 'deferred' : 'failed',
    kind: v.kind,
    // A server may quote the request back (a ServiceException, an error page): never the credential.
    reason: scrubSecrets(
      `${v.configError && !v.reason.startsWith('configuration error') ? 'configuration error: ' : ''}${v.reason} (${redacted})`,
      secrets,
    ),
    attempts: tried.made,
    httpStatus: v.httpStatus,
    bytes: v.bytes,
    latencyMs: v.latencyMs,
    ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}),
    ...(v.configError ? { configError: true } : {}),
  }));
  // Not for the request's own faults (permanent, configuration): those need fixing, not hiding.
  if (v.configError || !CURABLE_KINDS.has(v.kind)) return failed;
  // A tile the source failed to serve after its retries goes to the mirrors as a refused one does.
  const mirrored = await fromMirrors(call, scrubSecrets(`${v.reason} after ${tried.made} attempts`, secrets));
  if (mirrored === null) return null;
  // `stale` means stale: a tile the server failed to render now is drawn from its last good copy too, as a
  // refused one is.
  const stored = await staleCopies(call, mirrored);
  return failed.map((r, k) => {
    const mirror = mirrored[k];
    if (mirror) return servedOrRefused(mirror, r);
    const copy = stored[k];
    return copy
      ? {
          ...r,
          status: 'stale',
          reason: `${r.reason}; served the copy fetched ${new Date(copy.meta.fetchedAt).toISOString()}`,
          path: copy.path,
          bytes: copy.meta.bytes,
        }
      : r;
  });
}

/**
 * Tiles the source's breaker refused, each from the first mirror that serves it good: a mirror is fetched as a
 * source of its own (its breaker, retries, validation, its folder of the tile store), so its failures count
 * against it, never against the primary. Null where no mirror served the tile (every tile, for a source with
 * no mirrors); null for all when cancelled.
 */
async function fromMirrors(call: UnitCall, why: string): Promise<(TileResult | null)[] | null> {
  const { deps, store, input, tiles, policy, signal } = call;
  const out: (TileResult | null)[] = tiles.map(() => null);
  for (const m of input.mirrors ?? []) {
    const left = out.flatMap((r, k) => (r ? [] : [k]));
    if (!left.length) break;
    const mirrorInput: FetchBatchInput = {
      ...input,
      sourceName: m.name,
      source: m.source,
      tiles: left.map((k) => tiles[k]!),
      whenRefused: 'defer',
      conditional: false,
      mirrors: [],
    };
    for (const unit of requestUnits(m.source, mirrorInput.tiles)) {
      const got = await requestUnit({
        deps,
        stores: { store, ledger: null },
        input: mirrorInput,
        unit,
        key: sourceBreakerKey(m.source),
        useBreaker: input.breaker !== false && deps.guard !== undefined,
        policy,
        onDecision: () => undefined,
        signal,
        tried: { made: 0 },
      });
      if (got === null) return null;
      unit.members.forEach((j, n) => {
        const r = got[n]!;
        if (r.status === 'ok')
          out[left[j]!] = {
            ...r,
            tier: `mirror:${m.name}`,
            reason: `${why}; served by mirror ${JSON.stringify(m.name)}: ${r.reason}`,
          };
      });
    }
  }
  return out;
}
