/** Making one attempt's request: headers and credentials, the endpoint's pause, a connection slot, the breaker. */
import type { GuardDecision } from '../guard';
import { probeBoundMs } from '../guard/probe-bound';
import { applyAuth } from '../http/credentials';
import { fetchUrl, type HttpExchange } from '../http/fetch-url';
import { redirectPolicy } from '../http/redirects';
import { resendDropped } from './dropped-call';
import type { UnitCall } from './unit-call';

/** One attempt at a unit's request. */
export interface Attempt {
  call: UnitCall;
  /** Its number, from 1. */
  attempt: number;
  /** Calls sent again at once after the server dropped them unanswered (all attempts'): requests too, in `attempts`. */
  resends: { count: number };
}

/** A decision that lets a request go out. */
export type Admitted = Exclude<GuardDecision, { kind: 'refused' }>;

/** What came of one attempt's request. */
export type Sent =
  /** Not sent: a credential is missing (`message` says which). */
  | { outcome: 'no-credential'; message: string }
  /** Not sent: cancelled while waiting for a connection slot. */
  | { outcome: 'cancelled' }
  /** Not sent: the breaker refused it. */
  | { outcome: 'refused'; url: string; decision: Extract<GuardDecision, { kind: 'refused' }> }
  /** Sent: the exchange, the decision it went out under (null without the breaker) and the signals that could end it. */
  | {
      outcome: 'sent';
      url: string;
      decision: Admitted | null;
      x: HttpExchange;
      /** The source's total timeout. */
      deadline: AbortSignal;
      /** A probe's lease bound (null for any other call). */
      lease: AbortSignal | null;
      /** Aborted by the guard when the breaker opens while the call stalls. */
      shed: AbortSignal | undefined;
    };

/** An attempt's request that went out, and what came back. */
export type Exchanged = Extract<Sent, { outcome: 'sent' }>;

/** Makes one attempt's request, unless the credentials, the caller or the breaker stop it first. */
export async function sendRequest({ call, attempt, resends }: Attempt): Promise<Sent> {
  const { deps, source, unit, key, signal, conditional } = call;
  const headers: Record<string, string> = { 'user-agent': source.userAgent, ...source.headers };
  if (conditional?.meta.etag) headers['if-none-match'] = conditional.meta.etag;
  if (conditional?.meta.lastModified) headers['if-modified-since'] = conditional.meta.lastModified;
  let url: string;
  try {
    url = applyAuth(source.auth, unit.url, headers);
  } catch (err) {
    // A missing credential is the configuration's fault: no request, no breaker outcome, a clear reason.
    return { outcome: 'no-credential', message: (err as Error).message };
  }
  // A pause the endpoint asked for (its Retry-After, to this process or the fleet) is waited out holding no
  // connection; then a connection slot (queued here, not in the pool): the breaker decides, and the clocks
  // start, only when the request can go out at once.
  if (call.useBreaker) await deps.guard!.waitOutPause?.(key, signal);
  const slot = await deps.pools.slot(source, url, signal);
  if (!slot) return { outcome: 'cancelled' };
  try {
    const asked = Date.now();
    const decision = call.useBreaker ? await deps.guard!.acquire(key) : null;
    if (decision) call.onDecision(decision);
    if (decision?.kind === 'refused') {
      slot.release();
      return { outcome: 'refused', url, decision };
    }
    return {
      outcome: 'sent',
      url,
      decision,
      ...(await exchange({ call, attempt, resends, url, headers, decision, asked })),
    };
  } finally {
    slot.release();
  }
}

/** An attempt the breaker let through (or no breaker), with its URL and headers, credentials applied. */
interface Admission extends Attempt {
  url: string;
  headers: Record<string, string>;
  decision: Admitted | null;
  /** When the breaker was asked (Date.now()). */
  asked: number;
}

/** The request itself, sent once more at once if the server dropped it as a recovering one does. */
async function exchange({
  call,
  attempt,
  resends,
  url,
  headers,
  decision,
  asked,
}: Admission): Promise<Pick<Exchanged, 'x' | 'deadline' | 'lease' | 'shed'>> {
  const { deps, source, input, key, signal } = call;
  call.tried.made = attempt + resends.count;
  const deadline = AbortSignal.timeout(source.timeouts.totalMs);
  // The fleet's only probe ends before its token's lease does: past the lease the entity grants another, and
  // two probes would hit a recovering server (the lease may be shorter than the source's totalMs).
  const lease =
    decision?.kind === 'probe' ? AbortSignal.timeout(probeBoundMs(decision.token, Date.now() - asked)) : null;
  // The guard aborts a stalled call when the breaker opens while it waits (a hanging server).
  const shed = decision?.kind === 'proceed' ? decision.signal : undefined;
  const options = {
    dispatcher: deps.pools.for(source),
    headers,
    signal: AbortSignal.any([
      deadline,
      ...(signal ? [signal] : []),
      ...(shed ? [shed] : []),
      ...(lease ? [lease] : []),
    ]),
    redirects: redirectPolicy(source),
    ...(source.auth ? { auth: source.auth } : {}),
  };
  let x = await fetchUrl(url, options);
  // A call the server dropped unanswered may have been overtaken by its recovery: ask once more now.
  if (decision && resendDropped(decision.kind, x) && !options.signal.aborted) {
    deps.metrics?.request(input.sourceName, key, 'transient', x.latencyMs / 1000);
    deps.guard!.restarted?.(decision);
    call.tried.made = attempt + ++resends.count;
    x = await fetchUrl(url, options);
  }
  return { x, deadline, lease, shed };
}
