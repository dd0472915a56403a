/**
 * `shared`: tilebreaker's BreakerGuard and breaker entity workflow on a real Temporal dev server.
 *
 *   >>> runSharedMode(ctx) is the function the benchmark calls for this mode. <<<
 *
 * Each simulated worker has its own BreakerGuard (own view cache, own report buffer, reporter `sim-<i>`);
 * the guards share one Temporal client connection (as they share the process), never breaker state. Per
 * tile, as the pipeline fetches one: each attempt under the retry policy acquires a decision and releases it
 * with its own outcome (a probe gets scenario.probeAttempts attempts, 1 by default: one request tests
 * recovery); when refused, wait refusalWaitMs(retryAfterMs) and move on.
 */
import { RESEND_AFTER_MS } from '../../src/activities/fetch/dropped-call';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId } from '../../src/breaker/key';
import type { PolicyConfigInput, TransitionRecord } from '../../src/breaker';
import { transitionsQuery } from '../../src/messages/breaker';
import { startBenchTemporal } from './bench-temporal';
import { now, sleep } from './clock';
import { entityRunTimes, entityTaskFigures, type EntityRunTimes, type EntityTaskFigures } from './entity-tasks';
import { refusalWaitMs, tileUrl, type ModeContext } from './fleet';
import { backoffMs } from './retry';
import { isFailure } from '../../src/breaker/outcome';
import type { Scenario } from './types';

/** The x-sim-mode label on the entity's own probes, so the server counts them (503 outages only). */
export const ENTITY_PROBE_LABEL = 'shared-entity-probe';

/**
 * The entity's policy for this benchmark: the scenario's window, thresholds and cooldown (and the project's
 * default bucket size and fast window, which only a fleet-wide breaker can use), a constant cooldown
 * (no jitter, no growth: "cooldown 1 s, outage 40 s = 40 cooldowns"), one successful probe closes (as
 * cockatiel's half-open test does), the project's default ramp unless the scenario names one.
 */
export function sharedPolicyConfig(scenario: Scenario): PolicyConfigInput {
  return {
    windowMs: scenario.breaker.windowMs,
    // bucketMs and fastWindowMs: the project's defaults (250 ms buckets; the ratio rule also over the last 1 s).
    minSamples: scenario.breaker.minSamples,
    failureRatio: scenario.breaker.failureRatio,
    cooldownMs: scenario.breaker.cooldownMs,
    cooldownJitter: 0,
    cooldownMultiplier: 1,
    // Nor after a failed probe: every probe 1 s after the last, as cockatiel's halfOpenAfter does.
    probeBackoff: 1,
    probesToClose: 1,
    maxConcurrentProbes: 1,
    ...(scenario.rampMs !== null ? { rampMs: scenario.rampMs } : {}),
  };
}

/** What only the shared mode can tell: the entity's own record of the run. */
export interface SharedModeExtras {
  key: string;
  /** The entity's transitions, oldest first (workflow time, epoch ms). */
  transitions: TransitionRecord[];
  temporalAddress: string;
  /** Tiles a worker deferred to honour the ramp allowance. */
  deferred: number;
  failOpen: number;
  guardStats: {
    refused: number;
    probesGranted: number;
    viewReads: number;
    reportsSent: number;
    reportErrors: number;
    stalled: number;
    shed: number;
  };
  /** The entity's workflow task latency over every run (null when its histories could not be read). */
  entityTasks: EntityTaskFigures | null;
  /** When each run of the entity started and first completed a task (continue-as-new starts a run). */
  entityRuns: EntityRunTimes[];
}

export async function runSharedMode(ctx: ModeContext): Promise<SharedModeExtras> {
  const { scenario, recorder } = ctx;
  const temporal = await startBenchTemporal('outage', (m) => ctx.log(m));
  const { client, address, taskQueue } = temporal;
  ctx.log(`shared: Temporal at ${address}, worker on task queue ${taskQueue}`);

  const key = breakerKey(ctx.baseUrl);
  const config = sharedPolicyConfig(scenario);
  const extras: SharedModeExtras = {
    key,
    transitions: [],
    temporalAddress: address,
    deferred: 0,
    failOpen: 0,
    guardStats: { refused: 0, probesGranted: 0, viewReads: 0, reportsSent: 0, reportErrors: 0, stalled: 0, shed: 0 },
    entityTasks: null,
    entityRuns: [],
  };
  try {
    await ctx.runFleet((fetcher) => {
      const w = fetcher.worker;
      const guard = new BreakerGuard({
        client,
        taskQueue,
        reporter: `sim-${w}`,
        config,
        probe: {
          url: `${ctx.baseUrl}/0/0/0.png`,
          headers: { 'x-sim-mode': ENTITY_PROBE_LABEL },
          timeoutMs: 5_000,
          contentTypePrefix: 'image/',
        },
        logger: {
          warn: (message, meta) =>
            recorder.error(
              `guard sim-${w} at ${new Date(now()).toISOString().slice(11, 23)}: ${message} ${meta ? JSON.stringify(meta) : ''}`,
            ),
        },
      });
      // The worker's recent tile time: how long a tile deferred by the ramp waits (see below).
      let tileMs = scenario.tileLatencyMs;
      return {
        async step(seq, deadline) {
          const url = tileUrl(ctx.baseUrl, w, seq);
          // As the pipeline does (src/activities/fetch/fetch-batch.ts): every attempt, a retry too, is a decision
          // of its own, released with its own outcome; so a retry after a failure waits for that failure's report
          // to land and reads the verdict first, and a retry the breaker refuses is not sent.
          for (let i = 0; ; i++) {
            const asked = now();
            const decision: GuardDecision = await guard.acquire(key);
            const decidedAt = now();
            recorder.decisionMs.push(decidedAt - asked);
            if (decision.kind === 'refused') {
              recorder.view(w, 'refused');
              await sleep(refusalWaitMs(decision.retryAfterMs));
              return;
            }
            recorder.view(w, decision.kind);
            if (decision.kind === 'proceed') {
              if (decision.failOpen) extras.failOpen++;
              // The ramp after a recovery allows a share of normal concurrency. A worker with one call at a
              // time honours it by taking each tile with that probability and otherwise waiting about one tile
              // time, so the fleet's concurrency tracks allowance x normal.
              if (decision.allowance < 1 && Math.random() >= decision.allowance) {
                guard.abandon(decision); // no call made: it must not count as one in flight
                extras.deferred++;
                await sleep(tileMs);
                return;
              }
            }
            const probe = decision.kind === 'probe';
            const signal = decision.kind === 'proceed' ? decision.signal : undefined;
            const meta = {
              at: decidedAt,
              state: decision.kind === 'probe' ? 'half-open' : decision.state,
              failOpen: decision.kind === 'proceed' && decision.failOpen,
            };
            let last = await fetcher.attempt(url, probe, signal, meta);
            // As the pipeline does (src/activities/fetch/dropped-call.ts): a probe the server dropped unanswered, or
            // a call it dropped after a wait, may have been overtaken by its recovery, so it goes once more at once.
            if (last.error === 'reset' && (probe || last.latencyMs >= RESEND_AFTER_MS) && !signal?.aborted) {
              guard.restarted(decision);
              last = await fetcher.attempt(url, probe, signal, meta);
            }
            if (signal?.aborted) {
              // The guard abandoned the stalled call: the breaker opened while it hung. A refusal, as the pipeline treats it.
              guard.abandon(decision);
              recorder.view(w, 'refused');
              return;
            }
            if (last.kind === 'success') tileMs = 0.8 * tileMs + 0.2 * last.latencyMs;
            guard.release(decision, {
              kind: last.kind,
              latencyMs: last.latencyMs,
              ...(last.retryAfterMs !== undefined ? { retryAfterMs: last.retryAfterMs } : {}),
            });
            // The retry policy's bound: attempts per tile (a probe's own), the backoff, the deadline.
            if (!isFailure(last.kind) || i + 1 >= (probe ? scenario.probeAttempts : scenario.retry.attempts)) return;
            let wait = backoffMs(i, scenario.retry);
            if (last.retryAfterMs !== undefined)
              wait = Math.min(scenario.retry.capMs, Math.max(wait, last.retryAfterMs));
            if (now() + wait >= deadline) return;
            await sleep(wait);
          }
        },
        async close() {
          await guard.close();
          for (const k of [
            'refused',
            'probesGranted',
            'viewReads',
            'reportsSent',
            'reportErrors',
            'stalled',
            'shed',
          ] as const)
            extras.guardStats[k] += guard.stats[k];
        },
      };
    });
    try {
      extras.transitions = (await client.workflow.getHandle(breakerWorkflowId(key)).query(transitionsQuery))
        .slice()
        .sort((a, b) => a.at - b.at);
    } catch (err) {
      recorder.error(`transitions query: ${err instanceof Error ? err.message : String(err)}`);
    }
    try {
      extras.entityTasks = await entityTaskFigures(client, breakerWorkflowId(key));
      extras.entityRuns = await entityRunTimes(client, breakerWorkflowId(key));
    } catch (err) {
      recorder.error(`entity histories: ${err instanceof Error ? err.message : String(err)}`);
    }
  } finally {
    await temporal.close((m) => recorder.error(`worker: ${m}`));
  }
  return extras;
}
