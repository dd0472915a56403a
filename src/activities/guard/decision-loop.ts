import { setTimeout as sleep } from 'node:timers/promises';
import type { BreakerView } from '../../breaker';
import { nextStep, START, type DecideOptions, type FinalStep, type OwnState, type Progress } from './decide';
import type { EntityLink } from './entity-link';
import type { Pacer } from './pacer';
import type { Pauses } from './pauses';
import type { ProbeRequests } from './probe-requests';
import type { ProbeSpread } from './probe-spread';
import type { Quarantine } from './quarantine';
import type { ReportSender } from './report-sender';
import type { GuardDecision, GuardStats, ResolvedGuardOptions } from './types';
import type { ViewCache } from './view-cache';
import { WedgeWatch } from './wedge-watch';

/** The guard's parts a decision reads and drives (guard.ts builds them). */
export interface DecisionParts {
  o: ResolvedGuardOptions;
  stats: GuardStats;
  link: EntityLink;
  views: ViewCache;
  reports: ReportSender;
  probes: ProbeRequests;
  spread: ProbeSpread;
  pacer: Pacer;
  pauses: Pauses;
  quarantine: Quarantine;
  wedges: WedgeWatch;
  /** Per key, this process's calls that failed in a row, none succeeding since (the guard's release keeps it). */
  failStreaks: ReadonlyMap<string, number>;
}

/** The wedge watch of a guard: an entity found wedged, or moving again, is counted and said. */
export function watchWedges(
  o: Pick<ResolvedGuardOptions, 'wedgeGraceMs' | 'metrics' | 'logger'>,
  stats: GuardStats,
): WedgeWatch {
  return new WedgeWatch(o.wedgeGraceMs, {
    wedged: (key, evidence) => {
      stats.wedged++;
      o.metrics.entityWedged(key);
      o.logger.warn('breaker entity wedged (its workflow tasks are not done); failing open until it moves again', {
        key,
        ...evidence,
      });
    },
    moving: (key, wedgedForMs) =>
      o.logger.warn('breaker entity moving again; no longer failing open for it', { key, wedgedForMs }),
  });
}

/** The options decide.ts's rules read, picked from the guard's. */
function decideOptionsOf(o: ResolvedGuardOptions): DecideOptions {
  const { failureFlushMs, maxPaceWaitMs, cacheTtlMs, probeSpreadMs, probeJitter, holdAfterFailures, holdMs } = o;
  return {
    failureFlushMs,
    maxPaceWaitMs,
    cacheTtlMs,
    probeSpreadMs,
    probeJitter,
    holdAfterFailures,
    holdMs,
    ...(o.config ? { config: o.config } : {}),
  };
}

/**
 * The loop around decide.ts's pure `nextStep`: it gathers this process's own state for the key, performs the
 * one step asked for (the I/O, the waits), notes it in the decision's progress and asks again, until the step
 * is a decision, which it hands out as the guard's.
 */
export class DecisionLoop {
  private readonly options: DecideOptions;
  /** Keys whose last decision found the entity wedged: a fail-open for them says so. */
  private readonly wedgedNow = new Set<string>();

  constructor(private readonly parts: DecisionParts) {
    this.options = decideOptionsOf(parts.o);
  }

  /**
   * The decision for one call: decide.ts's `nextStep` says what to do next from the view as last read, this
   * process's own state for the key and the clock; this loop performs the step (the I/O, the waits), notes it
   * and asks again, until the step is a decision.
   */
  async decide(key: string): Promise<GuardDecision> {
    const { stats, reports, views, pacer, probes, spread } = this.parts;
    let progress: Progress = { ...START };
    let view: BreakerView | null | undefined;
    for (;;) {
      // Gathered, decided and begun in one turn: no other call's step comes between.
      const now = Date.now();
      const { step, spreadSince } = nextStep(view, this.own(key, now), this.options, now, progress);
      if (spreadSince === null) spread.clear(key);
      else if (spreadSince !== undefined) spread.saw(key, spreadSince);
      switch (step.kind) {
        case 'await-alarm': {
          const alarm = reports.alarm(key);
          if (alarm) await Promise.race([alarm, new Promise((r) => setTimeout(r, step.maxMs))]);
          // The entity's verdict on what was just reported is what the decision wants: read it afresh.
          progress = { ...progress, alarmAwaited: true, read: false };
          break;
        }
        case 'read':
          view = await this.readView(key);
          progress = { ...progress, read: true };
          break;
        case 'wait': {
          if (step.why === 'paused' && !progress.pauseWaited) stats.paced++;
          const heldSince = step.why === 'hold' ? (progress.heldSince ?? now) : progress.heldSince;
          if (step.why === 'hold' && progress.heldSince === undefined) stats.held = (stats.held ?? 0) + 1;
          await sleep(Math.max(0, step.untilMs - Date.now()));
          if (step.then === 'restart') {
            views.invalidate(key);
            progress = { ...START };
            view = undefined;
          } else
            progress = {
              ...progress,
              pauseWaited: step.why === 'paused' || progress.pauseWaited,
              read: false,
              heldSince,
            };
          break;
        }
        case 'share':
          progress = { ...progress, share: await pacer.rateFor(key, view ?? null, step.allowance) };
          break;
        case 'pace':
          await pacer.pace(key, step.rate);
          progress = { ...progress, paced: true, read: step.then !== 'reread' };
          break;
        case 'request-probe': {
          // A request chained behind this process's own successful probe (probe-requests.ts's nextProbe)
          // may find the round closed by it: decide again on a fresh view, which carries the ramp.
          const chained = probes.nextProbe(key, now);
          let answer: GuardDecision;
          try {
            answer = await probes.request(key);
          } catch (err) {
            spread.clear(key);
            throw err;
          }
          if (chained && answer.kind === 'proceed') {
            views.invalidate(key);
            progress = { ...START };
            view = undefined;
          } else progress = { ...progress, answer };
          break;
        }
        default:
          return this.decided(key, step, now);
      }
    }
  }

  /**
   * The entity's view for deciding: undefined (fail open) when it cannot be read, and when it is wedged: a
   * view whose timers are overdue or whose workflow tasks are not done (wedge-watch.ts) hears no report and
   * moves no state, so deciding on it would refuse (or wait for a probe) with nothing to end it.
   */
  async readView(key: string): Promise<BreakerView | null | undefined> {
    const { views, wedges } = this.parts;
    const view = await views.get(key);
    if (view !== undefined && wedges.wedged(key, view, views.task(key), Date.now())) {
      this.wedgedNow.add(key);
      return undefined;
    }
    this.wedgedNow.delete(key);
    return view;
  }

  /** This process's own state for `key`, as the decision reads it (decide.ts). */
  private own(key: string, now: number): OwnState {
    const { reports, pauses, views, pacer, spread, probes, link, quarantine } = this.parts;
    return {
      alarm: reports.alarm(key) !== null,
      pausedUntil: pauses.until(key, now),
      lastView: views.last(key),
      share: pacer.knownShare(key),
      spreadSince: spread.since(key),
      asking: probes.asking(key),
      nextProbe: probes.nextProbe(key, now),
      failStreak: this.parts.failStreaks.get(key) ?? 0,
      wedged: this.wedgedNow.has(key),
      blind: link.losses.blind(key),
      quarantine: quarantine.state(key),
    };
  }

  /** The decision as the guard hands it out, counted. */
  private decided(key: string, step: FinalStep, now: number): GuardDecision {
    const { stats, link, quarantine } = this.parts;
    let decision: GuardDecision;
    switch (step.kind) {
      case 'refuse':
        stats.refused++;
        return { kind: 'refused', key, state: step.state, retryAfterMs: step.retryAfterMs, reason: step.reason };
      case 'probe':
        return { kind: 'probe', key, token: step.token };
      case 'proceed':
        decision = { kind: 'proceed', key, state: step.state, allowance: step.allowance, failOpen: false };
        break;
      case 'fail-open':
        if (step.reason === 'reports-dropped') {
          stats.failOpen++;
          stats.blindFailOpen++;
          decision = {
            kind: 'proceed',
            key,
            state: step.state,
            allowance: step.allowance,
            failOpen: true,
            failOpenReason: step.reason,
          };
        } else decision = link.failOpen(key, step.reason);
        break;
    }
    if (step.quarantineProbe) quarantine.probing(decision, now);
    return decision;
  }
}
