import {
  breakerView,
  DEFAULT_POLICY_CONFIG,
  initialState,
  pausedForMs,
  permitFor,
  rateShare,
  type BreakerStateName,
  type BreakerView,
  type ProbeToken,
} from '../../breaker';
import type { FailOpenReason } from '../../messages/metrics';
import type { ResolvedGuardOptions } from './types';

/**
 * The guard's decision for one call, as one pure function: `nextStep(view, own, options, now, progress)` says
 * what to do next, from the entity's view as last read, this process's own state for the key, the options
 * and the clock. It does no I/O, reads no clock and keeps nothing: the same inputs always give the same step.
 * The guard's decision loop (decision-loop.ts) goes around it: it gathers the state, performs the one step
 * asked for (wait for a failure report to land, read the view, wait out a pause or a probe spread share, ask
 * the pacer for the rate's share and take a slot, ask the entity for the probe token), records it in
 * `progress`, and asks again until the step is a decision (`proceed`, `fail-open`, `refuse`, `probe`).
 */

/** What a breaker that does not exist yet is: a fresh one, closed. */
export const CLOSED_VIEW: BreakerView = breakerView(initialState(DEFAULT_POLICY_CONFIG));

/** The options the decision reads. */
export type DecideOptions = Pick<
  ResolvedGuardOptions,
  'failureFlushMs' | 'maxPaceWaitMs' | 'cacheTtlMs' | 'probeSpreadMs' | 'probeJitter' | 'config'
> &
  Partial<Pick<ResolvedGuardOptions, 'holdAfterFailures' | 'holdMs'>>;

/** This process's own quarantine of the key, while it holds (quarantine.ts keeps it). */
export interface QuarantineState {
  reason: string;
  /** When the next call may go through as the quarantine's probe. */
  nextProbeAt: number;
  /** The quarantine's probe call is in flight. */
  probing: boolean;
}

/** This process's own state for the key, as the guard's parts hold it when the step is asked for. */
export interface OwnState {
  /** A failure report of this process's is on its way to the entity (report-sender.ts). */
  alarm: boolean;
  /** The end of the pause a 429 asked this process for (pauses.ts); 0: none. */
  pausedUntil: number;
  /** The last view read, however old (null: none): its pause and rate hold while the entity cannot be read. */
  lastView: BreakerView | null;
  /** This process's share of the rate (requests/s) as the entity last published it (pacer.ts); null: none known. */
  share: number | null;
  /** When this process first saw the key half-open with a token free (probe-spread.ts); undefined: not seen. */
  spreadSince: number | undefined;
  /** This process is already asking for the key's probe token (probe-requests.ts). */
  asking: boolean;
  /** This process's probe of the key succeeded moments ago: it asks for the round's next token at once. */
  nextProbe?: boolean;
  /** This process's calls to the key that failed in a row, none succeeding since (guard.ts). */
  failStreak?: number;
  /** The last read found the entity wedged (wedge-watch.ts): the view is undefined for that reason. */
  wedged: boolean;
  /** The entity has not heard this process's last reports (report-loss.ts). */
  blind: boolean;
  /** This process's quarantine of the endpoint (quarantine.ts); null: none. */
  quarantine: QuarantineState | null;
}

/** The entity's answer to a request for the probe token (probe-requests.ts). */
export type ProbeAnswer =
  | { kind: 'probe'; token: ProbeToken }
  | { kind: 'proceed'; state: BreakerStateName; allowance: number }
  | { kind: 'refused'; state: BreakerStateName; retryAfterMs: number | null; reason: string };

/** What this decision has done so far (the guard records each step it performs). */
export interface Progress {
  /** Waited for this process's failure report to land (or for the most it waits). */
  alarmAwaited: boolean;
  /** The view in hand was read after the last wait; false: read it (again). */
  read: boolean;
  /** Waited out a 429's pause: the pause is looked at again after each wait, whatever the breaker says. */
  pauseWaited: boolean;
  /** This process's rate share asked of the pacer: null for no rate limit; undefined: not asked yet. */
  share?: number | null | undefined;
  /** Took a slot at the rate's pace (and waited for it). */
  paced: boolean;
  /** The entity's answer to this decision's request for the probe token. */
  answer?: ProbeAnswer | undefined;
  /** When this decision began holding after failures in a row (holdAfterFailures). */
  heldSince?: number | undefined;
}

/** A decision's first step: nothing done yet (and again after a probe spread's wait). */
export const START: Readonly<Progress> = Object.freeze({
  alarmAwaited: false,
  read: false,
  pauseWaited: false,
  paced: false,
});

/** A step that ends the decision. */
export type FinalStep =
  /** Call the endpoint (quarantineProbe: as the quarantine's one call per interval). */
  | { kind: 'proceed'; state: BreakerStateName; allowance: number; quarantineProbe: boolean }
  /** Call the endpoint, though the breaker cannot tell (unreachable, wedged) or cannot hear of it (reports-dropped). */
  | { kind: 'fail-open'; reason: FailOpenReason; state: BreakerStateName; allowance: number; quarantineProbe: boolean }
  /** Do not call; come back after retryAfterMs (null: no known end). */
  | { kind: 'refuse'; state: BreakerStateName; retryAfterMs: number | null; reason: string }
  /** Call once as the fleet's probe, with the token the entity granted. */
  | { kind: 'probe'; token: ProbeToken };

/** A step of I/O (or time) the guard performs before asking again. */
export type IoStep =
  /** Wait for this process's failure report to land, at most maxMs, so the entity's verdict is read next. */
  | { kind: 'await-alarm'; maxMs: number }
  /** Read the entity's view (view-cache.ts, then the wedge watch). */
  | { kind: 'read' }
  /** Wait until untilMs: a 429's pause (then read again) or this process's share of the probe spread (then start over). */
  | { kind: 'wait'; untilMs: number; why: 'paused' | 'probe-spread' | 'hold'; then: 'reread' | 'restart' }
  /** Ask the pacer for this process's share of the rate (joining the entity's count of sharers if needed). */
  | { kind: 'share'; allowance: number }
  /** Take the next slot at `rate` requests/s and wait for it; then read again, or decide on what is known. */
  | { kind: 'pace'; rate: number; then: 'reread' | 'decide' }
  /** Ask the entity for the probe token. */
  | { kind: 'request-probe' };

export type GuardStep = FinalStep | IoStep;

export interface NextStep {
  step: GuardStep;
  /** The probe spread's memory for the key: null, forget it; a time, remember it as when the half-open was first seen. */
  spreadSince?: number | null | undefined;
}

const FINAL_KINDS: ReadonlySet<GuardStep['kind']> = new Set(['proceed', 'fail-open', 'refuse', 'probe']);

export function isFinal(step: GuardStep): step is FinalStep {
  return FINAL_KINDS.has(step.kind);
}

/**
 * The next step of the decision for one call. `view`: the entity's view as read in this decision (null: no
 * entity, closed until someone reports; undefined: it could not be read, or is wedged), meaningful once
 * `progress.read`.
 */
export function nextStep(
  view: BreakerView | null | undefined,
  own: OwnState,
  o: DecideOptions,
  now: number,
  progress: Progress,
): NextStep {
  const p = progress;
  if (p.answer) return { step: admitted(fromAnswer(p.answer), own, now), spreadSince: null };
  // This process has just seen failures: let the entity hear of them and read its verdict before calling
  // again, but never wait long on it (a busy server must not stall the pipeline).
  if (own.alarm && !p.alarmAwaited) return { step: { kind: 'await-alarm', maxMs: 4 * o.failureFlushMs } };
  if (!p.read) return { step: { kind: 'read' } };
  const s: StepInputs = { own, o, now, p };
  const paused = pauseStep(view, s);
  if (paused) return { step: paused };
  if (view === undefined) return { step: unreadableStep(s) };
  return breakerStep(view, s);
}

/** What nextStep's rules read besides the view: this process's own state, the options, the clock, the progress. */
interface StepInputs {
  own: OwnState;
  o: DecideOptions;
  now: number;
  p: Progress;
}

/**
 * A 429 asked to wait (this process's own, or the fleet's from the entity): a call that may go waits it out
 * first; the breaker stays closed. Failing open keeps the last pause known, as it keeps the pace. Once
 * waiting, the pause is looked at after each wait until none is left; never again once the rate is asked.
 * Undefined: no pause holds this call.
 */
function pauseStep(view: BreakerView | null | undefined, { own, o, now, p }: StepInputs): GuardStep | undefined {
  if (
    p.share === undefined &&
    !p.paced &&
    (p.pauseWaited || view === undefined || permitFor(view ?? CLOSED_VIEW, now).allow)
  ) {
    const seen = view === undefined ? own.lastView : view;
    const left = pauseLeftMs(own.pausedUntil, seen, now);
    if (left > o.maxPaceWaitMs)
      return refuse(
        seen?.state ?? 'closed',
        left,
        `paced: the endpoint asked to wait (Retry-After) until ${timeText(now + left)}`,
      );
    if (left > 0) return { kind: 'wait', untilMs: now + left, why: 'paused', then: 'reread' };
  }
  return undefined;
}

/**
 * The entity cannot be read: proceed, but at the pace last known for this process (the rate's share), so
 * an outage of Temporal does not lift an endpoint's rate limit. After a pace already taken, at once.
 */
function unreadableStep({ own, o, now, p }: StepInputs): GuardStep {
  const rate = p.paced ? null : failOpenRate(own.share, own.lastView, o.config?.maxRequestsPerSecond ?? null);
  if (rate !== null) return { kind: 'pace', rate, then: 'decide' };
  return admitted(
    {
      kind: 'fail-open',
      reason: own.wedged ? 'wedged' : 'unreachable',
      state: 'closed',
      allowance: 1,
      quarantineProbe: false,
    },
    own,
    now,
  );
}

/** The step by the breaker's permit, on a view read (null: no entity yet, or it finished idle). */
function breakerStep(view: BreakerView | null, s: StepInputs): NextStep {
  const { own, o, now, p } = s;
  // No entity yet (or it finished idle): closed until someone reports otherwise.
  const permit = permitFor(view ?? CLOSED_VIEW, now);
  // This process's last calls all failed and the breaker has not said so yet: hold this one a moment, reading
  // the verdict again, instead of sending more into what is likely an outage's onset. A success of any of its
  // calls (the streak ends), the breaker's verdict, or the hold's end lets it go on.
  const hold = holdLeftMs(view, permit.allow, own, o, p, now);
  if (hold > 0) return { step: { kind: 'wait', untilMs: now + hold, why: 'hold', then: 'reread' } };
  // A rate-limited endpoint: this process's share, then a slot at that pace. The wait for a slot can be long:
  // decide again on the state as it is by then (the breaker may have opened), without pacing twice.
  if (permit.allow && !p.paced) {
    if (p.share === undefined) return { step: { kind: 'share', allowance: permit.allowance } };
    if (p.share !== null) return { step: { kind: 'pace', rate: p.share, then: 'reread' } };
  }
  if (permit.allow)
    return {
      step: admitted(
        { kind: 'proceed', state: permit.state, allowance: permit.allowance, quarantineProbe: false },
        own,
        now,
      ),
      spreadSince: null,
    };
  if (!permit.probeRequired)
    return { step: refuse(permit.state, permit.retryAfterMs, `breaker ${permit.state}`), spreadSince: null };
  return probeStep(view, s);
}

/**
 * Half-open (or a cooldown or timed force-open that has ended): only a probe token's holder may call. Ask for
 * the token, wait this process's share of the spread, or refuse.
 */
function probeStep(view: BreakerView | null, { own, o, now }: StepInputs): NextStep {
  // Half-open with every token out: refuse here, without a signal (a fleet asking every second would load
  // the entity for nothing). The holder's result or the lease's end frees the slot; the next view shows it.
  // Unless the token out is this process's own, just returned with a success: the round's next probe is
  // asked for at once, behind that result (probe-requests.ts), with no spread (nobody else saw it free).
  if (own.nextProbe && !own.asking) return { step: { kind: 'request-probe' }, spreadSince: null };
  if (view && view.state === 'half-open' && view.probesOutstanding >= view.maxConcurrentProbes) {
    return {
      step: refuse('half-open', o.cacheTtlMs, 'half-open: another worker holds the probe token'),
      spreadSince: null,
    };
  }
  // The whole fleet sees the half-open at the same instant: wait this process's share of the spread, then
  // decide afresh on the state as it is by then (another process's token may be out).
  const spread = probeSpread(view, own.spreadSince, o, now);
  const remember = spread.remember === undefined ? {} : { spreadSince: spread.remember };
  if (spread.waitMs > 0)
    return { step: { kind: 'wait', untilMs: now + spread.waitMs, why: 'probe-spread', then: 'restart' }, ...remember };
  // Half-open: one request for a token per process at a time; the others wait for its answer.
  if (own.asking)
    return {
      step: refuse('half-open', o.cacheTtlMs, 'half-open: this process is already asking for the probe token'),
      ...remember,
    };
  return { step: { kind: 'request-probe' }, ...remember };
}

/** How long this decision holds now after failures in a row (0: not at all): a quarter of holdMs at a time. */
export function holdLeftMs(
  view: BreakerView | null,
  allow: boolean,
  own: Pick<OwnState, 'failStreak'>,
  o: DecideOptions,
  p: Pick<Progress, 'heldSince'>,
  now: number,
): number {
  const after = o.holdAfterFailures ?? 0;
  const holdMs = o.holdMs ?? 0;
  if (!view || !allow || view.state !== 'closed' || after <= 0 || holdMs <= 0 || (own.failStreak ?? 0) < after)
    return 0;
  const left = (p.heldSince ?? now) + holdMs - now;
  return left > 0 ? Math.min(left, holdMs / 4) : 0;
}

/** How long calls must still wait at `now` (0: not paused): this process's own pause, or the fleet's in `view`. */
export function pauseLeftMs(pausedUntil: number, view: BreakerView | null, now: number): number {
  return Math.max(pausedUntil - now, view ? pausedForMs(view, now) : 0, 0) || 0;
}

/**
 * The rate to keep while the entity cannot be reached (failing open), or null for none: the share it last
 * published for this process (the full share: a ramp's progress is unknown); with no share known yet, the
 * last view's rate split among its last count of sharers and this one; with no view either, this guard's
 * own maxRequestsPerSecond, whole (the fleet's size is unknown, and one process must stay under the
 * endpoint's limit at least). No rate ever configured or seen: no pacing, as before.
 */
export function failOpenRate(share: number | null, last: BreakerView | null, ownRate: number | null): number | null {
  if (share !== null) return share;
  if (last?.rateLimit !== undefined) return rateShare(last, 1, false);
  return ownRate;
}

/**
 * This process's wait before it asks for the token (0: ask now): its share (`probeJitter`) of probeSpreadMs
 * from when the half-open began, as far as it can tell: a view still showing the cooldown (or timed
 * force-open) says when it ended, the same instant fleet-wide; a view that says half-open already, from when
 * this process first saw it so (`remember`: that is now). Never more than one spread.
 */
export function probeSpread(
  view: BreakerView | null,
  firstSeen: number | undefined,
  o: Pick<DecideOptions, 'probeSpreadMs' | 'probeJitter'>,
  now: number,
): { waitMs: number; remember?: number } {
  if (!(o.probeSpreadMs > 0)) return { waitMs: 0 };
  const ended = view?.state === 'open' ? view.cooldownUntil : view?.state === 'forced-open' ? view.forcedUntil : null;
  let since: number;
  let remember: number | undefined;
  if (ended !== null && ended !== undefined && ended <= now) since = ended;
  // (A first sight later than now is the clock stepping back: seen now, so the wait stays within one spread.)
  else if (firstSeen !== undefined && firstSeen <= now) since = firstSeen;
  else since = remember = now;
  const waitMs = Math.max(0, since + o.probeJitter * o.probeSpreadMs - now) || 0;
  return remember === undefined ? { waitMs } : { waitMs, remember };
}

/** What this process's quarantine does to a call the breaker lets through (quarantine.ts has the rule). */
export type QuarantineVerdict =
  { kind: 'pass' } | { kind: 'probe' } | { kind: 'refuse'; retryAfterMs: number; reason: string };

/** While quarantined, calls are refused except one per probe interval, when none is in flight. */
export function quarantineVerdict(q: QuarantineState | null, now: number): QuarantineVerdict {
  if (!q) return { kind: 'pass' };
  if (!q.probing && now >= q.nextProbeAt) return { kind: 'probe' };
  return { kind: 'refuse', retryAfterMs: Math.max(0, q.nextProbeAt - now) || 0, reason: `quarantined: ${q.reason}` };
}

/**
 * A call the breaker lets through, as this process finally decides it: its own quarantine may still refuse it,
 * and while the entity does not hear this process's reports it counts as failing open (reports-dropped).
 */
function admitted(step: FinalStep, own: OwnState, now: number): FinalStep {
  if (step.kind !== 'proceed' && step.kind !== 'fail-open') return step;
  const q = quarantineVerdict(own.quarantine, now);
  if (q.kind === 'refuse') return refuse(step.state, q.retryAfterMs, q.reason);
  const quarantineProbe = q.kind === 'probe';
  if (step.kind === 'proceed' && own.blind)
    return {
      kind: 'fail-open',
      reason: 'reports-dropped',
      state: step.state,
      allowance: step.allowance,
      quarantineProbe,
    };
  return { ...step, quarantineProbe };
}

function fromAnswer(a: ProbeAnswer): FinalStep {
  switch (a.kind) {
    case 'probe':
      return { kind: 'probe', token: a.token };
    case 'proceed':
      return { kind: 'proceed', state: a.state, allowance: a.allowance, quarantineProbe: false };
    case 'refused':
      return refuse(a.state, a.retryAfterMs, a.reason);
  }
}

function refuse(state: BreakerStateName, retryAfterMs: number | null, reason: string): FinalStep {
  return { kind: 'refuse', state, retryAfterMs, reason };
}

/** A time for a message: ISO 8601, or the epoch ms when out of a Date's range. */
function timeText(ms: number): string {
  return Number.isFinite(ms) && Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : `${ms} ms since the epoch`;
}
