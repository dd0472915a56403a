/**
 * `bench:outage -- --scenario load`: what the breaker costs Temporal as the fleet grows. A fleet of simulated
 * workers (each its own BreakerGuard, the real one, against the real entity on a Temporal dev server, as in
 * the shared mode) fetches tiles back to back from a healthy endpoint for `healthy` seconds, then through an
 * `outage` of 503s. Every call the guards make to Temporal goes through a counting client interceptor, so the
 * figures are the calls as made, not the guards' own tallies:
 *
 *   signals-per-s                      report signals (plain or with start) the key's one entity received per
 *                                      second while the endpoint was healthy;
 *   describes-per-worker-s             view reads (DescribeWorkflowExecution) per worker per second, whole run;
 *   temporal-calls-per-1000-requests   every guard call to Temporal (signals, describes, queries) per 1,000
 *                                      tile requests the workers made, whole run;
 *   detect-ms                          from the outage's start until every worker has been refused once.
 *
 * With `--workers` above 60 a 60-worker run goes first (its line printed before the larger one; `--only`: not),
 * both on one dev server, each with its own tile server and so its own key and entity.
 */
import { Client, type WorkflowClientInterceptor } from '@temporalio/client';
import { loadavg } from 'node:os';
import { BreakerGuard, type GuardDecision } from '../../src/activities/guard';
import { breakerKey, breakerWorkflowId } from '../../src/breaker/key';
import { transitionsQuery, type OutcomeReport } from '../../src/messages/breaker';
import { startBenchTemporal } from './bench-temporal';
import { now, sleep } from './clock';
import { entityTaskFigures, entityTaskLine } from './entity-tasks';
import { makeModeContext, refusalWaitMs, tileUrl } from './fleet';
import { ModeRecorder } from './recorder';
import { withRetry } from './retry';
import { OutageServerProcess } from './server-client';
import { sharedPolicyConfig } from './shared-mode';
import type { Scenario } from './types';

export interface LoadOptions {
  workers: number;
  /** Only the `workers` fleet, without the 60-worker run first. */
  only?: boolean;
  healthyMs: number;
  outageMs: number;
  tileLatencyMs: number;
  /** The scenario's breaker and retry settings (the bench's flags). */
  base: Scenario;
  log(message: string): void;
  /** Each run's figures as soon as it ends. */
  onResult?(f: LoadFigures): void;
}

export interface LoadFigures {
  workers: number;
  signalsPerS: number;
  describesPerWorkerS: number;
  callsPer1000Requests: number;
  detectMs: number;
  /** Also logged: the last half of the healthy phase alone, and the counts behind the figures. */
  steadySignalsPerS: number;
  healthyDescribesPerWorkerS: number;
  signals: number;
  describes: number;
  queries: number;
  requests: number;
  /** Workers never refused during the outage (detect-ms is NaN then). */
  neverRefused: number;
  loadAverage: number[];
}

/** The line scripts read. */
export function loadLine(f: LoadFigures): string {
  return `load: workers=${f.workers} signals-per-s=${f.signalsPerS.toFixed(2)} describes-per-worker-s=${f.describesPerWorkerS.toFixed(3)} temporal-calls-per-1000-requests=${f.callsPer1000Requests.toFixed(1)} detect-ms=${f.detectMs.toFixed(0)}`;
}

/** Every guard call to Temporal, by kind, with the time it was made. */
class CallCounter {
  readonly signals: number[] = [];
  /** Report signals carrying failures (or stalled calls), which go at once, not at the spacing. */
  readonly failureSignals: number[] = [];
  readonly describes: number[] = [];
  readonly queries: number[] = [];

  interceptor(): WorkflowClientInterceptor {
    return {
      signal: (input, next) => (this.signal(input.args[0]), next(input)),
      signalWithStart: (input, next) => (this.signal(input.signalArgs[0]), next(input)),
      describe: (input, next) => (this.describes.push(now()), next(input)),
      query: (input, next) => (this.queries.push(now()), next(input)),
    };
  }

  private signal(arg: unknown): void {
    const at = now();
    this.signals.push(at);
    const r = arg as Partial<OutcomeReport> | undefined;
    if ((r?.counts?.transient ?? 0) + (r?.counts?.['service-exception'] ?? 0) > 0 || r?.stalled)
      this.failureSignals.push(at);
  }
}

const between = (times: readonly number[], from: number, to: number) => times.filter((t) => t >= from && t < to).length;

/** Runs the load scenario at 60 workers (when more are asked for) and at `workers`; returns each run's figures. */
export async function runLoadScenario(o: LoadOptions): Promise<LoadFigures[]> {
  const temporal = await startBenchTemporal('load', (m) => o.log(m));
  const { client: plain, connection, namespace, taskQueue } = temporal;
  const results: LoadFigures[] = [];
  try {
    for (const workers of o.workers > 60 && !o.only ? [60, o.workers] : [o.workers]) {
      const counter = new CallCounter();
      const client = new Client({ connection, namespace, interceptors: { workflow: [counter.interceptor()] } });
      const f = await runOnce({ ...o, workers }, client, plain, taskQueue, counter);
      results.push(f);
      // At once: a crash in the larger run must not lose the smaller one's line.
      o.onResult?.(f);
    }
  } finally {
    await temporal.close((m) => o.log(`load: worker: ${m}`));
  }
  return results;
}

/** `client` counts the guards' calls; `plain` reads the entity's record afterwards, uncounted. */
async function runOnce(
  o: LoadOptions,
  client: Client,
  plain: Client,
  taskQueue: string,
  counter: CallCounter,
): Promise<LoadFigures> {
  const scenario: Scenario = {
    ...o.base,
    workers: o.workers,
    healthyMs: o.healthyMs,
    outageMs: o.outageMs,
    recoveryMs: 1_000,
    outageKind: '503',
    retryAfterSec: null,
  };
  const server = await OutageServerProcess.spawn(o.tileLatencyMs);
  const recorder = new ModeRecorder('shared');
  const ctx = makeModeContext('shared', scenario, server, recorder, (m) => o.log(m));
  const key = breakerKey(ctx.baseUrl);
  const config = sharedPolicyConfig(scenario);
  o.log(`load: ${o.workers} workers on ${key}, ${o.healthyMs / 1000} s healthy then ${o.outageMs / 1000} s of 503s`);
  try {
    const schedule = await ctx.runFleet((fetcher) => {
      const w = fetcher.worker;
      const guard = new BreakerGuard({
        client,
        taskQueue,
        reporter: `load-${w}`,
        config,
        logger: { warn: (m) => recorder.error(`guard load-${w}: ${m}`) },
      });
      return {
        async step(seq, deadline) {
          const decision: GuardDecision = await guard.acquire(key);
          if (decision.kind === 'refused') {
            recorder.view(w, 'refused');
            await sleep(refusalWaitMs(decision.retryAfterMs));
            return;
          }
          recorder.view(w, decision.kind);
          const probe = decision.kind === 'probe';
          const signal = decision.kind === 'proceed' ? decision.signal : undefined;
          const { last } = await withRetry(
            () => fetcher.attempt(tileUrl(ctx.baseUrl, w, seq), probe, signal),
            scenario.retry,
            probe ? 1 : scenario.retry.attempts,
            deadline,
          );
          if (signal?.aborted) {
            guard.abandon(decision);
            recorder.view(w, 'refused');
            return;
          }
          guard.release(decision, {
            kind: last.kind,
            latencyMs: last.latencyMs,
            ...(last.retryAfterMs !== undefined ? { retryAfterMs: last.retryAfterMs } : {}),
          });
        },
        async close() {
          await guard.close();
        },
      };
    });
    const { startAt, outageAt, endAt } = schedule;
    const healthyS = (outageAt - startAt) / 1000;
    const runS = (endAt - startAt) / 1000;
    const firstRefusal = new Map<number, number>();
    for (const v of recorder.views)
      if (v.kind === 'refused' && v.at >= outageAt && !firstRefusal.has(v.worker)) firstRefusal.set(v.worker, v.at);
    const neverRefused = o.workers - firstRefusal.size;
    const signals = between(counter.signals, startAt, endAt);
    const describes = between(counter.describes, startAt, endAt);
    const queries = between(counter.queries, startAt, endAt);
    const requests = recorder.attempts.filter((a) => a.start >= startAt && a.start < endAt).length;
    const steadyFrom = startAt + (outageAt - startAt) / 2;
    // Where the time to detect went: the entity's trip, then each worker's first refusal after it.
    let openedAfterMs = Number.NaN;
    try {
      const transitions = await plain.workflow.getHandle(breakerWorkflowId(key)).query(transitionsQuery);
      const opened = transitions.filter((t) => t.to === 'open' && t.at >= outageAt).sort((a, b) => a.at - b.at)[0];
      if (opened) openedAfterMs = opened.at - outageAt;
      else
        o.log(
          `load: ${o.workers} workers: no trip in the outage; last transitions: ${JSON.stringify(transitions.slice(0, 3).map((t) => ({ to: t.to, reason: t.reason, afterMs: Math.round(t.at - outageAt), detail: t.detail })))}`,
        );
    } catch (err) {
      recorder.error(`transitions query: ${err instanceof Error ? err.message : String(err)}`);
      o.log(`load: ${o.workers} workers: transitions query: ${err instanceof Error ? err.message : String(err)}`);
    }
    // A starved machine shows first in the entity's workflow tasks (the figures are meaningless when they are slow).
    const tasks = await entityTaskFigures(plain, breakerWorkflowId(key)).catch(() => null);
    o.log(`load: ${o.workers} workers: ${tasks ? entityTaskLine(tasks).trim() : 'entity workflow tasks: n/a'}`);
    const refusedAfter = [...firstRefusal.values()].map((t) => t - outageAt).sort((a, b) => a - b);
    const pct = (q: number) =>
      refusedAfter.length
        ? refusedAfter[Math.min(refusedAfter.length - 1, Math.floor(q * refusedAfter.length))]!.toFixed(0)
        : 'n/a';
    const f: LoadFigures = {
      workers: o.workers,
      signalsPerS: between(counter.signals, startAt, outageAt) / healthyS,
      describesPerWorkerS: describes / o.workers / runS,
      callsPer1000Requests: requests ? ((signals + describes + queries) * 1000) / requests : Number.NaN,
      detectMs: neverRefused ? Number.NaN : Math.max(...firstRefusal.values()) - outageAt,
      steadySignalsPerS: between(counter.signals, steadyFrom, outageAt) / ((outageAt - steadyFrom) / 1000),
      healthyDescribesPerWorkerS: between(counter.describes, startAt, outageAt) / o.workers / healthyS,
      signals,
      describes,
      queries,
      requests,
      neverRefused,
      loadAverage: loadavg(),
    };
    o.log(
      `load: ${o.workers} workers: ${requests} requests, ${signals} signals, ${describes} describes, ${queries} queries; ` +
        `signals/s in the second half of the healthy phase ${f.steadySignalsPerS.toFixed(2)} (of which carrying failures or stalls ${(between(counter.failureSignals, steadyFrom, outageAt) / ((outageAt - steadyFrom) / 1000)).toFixed(2)}); describes/worker/s while healthy ${f.healthyDescribesPerWorkerS.toFixed(3)}; ` +
        `entity opened ${openedAfterMs.toFixed(0)} ms into the outage, workers first refused at p50 ${pct(0.5)} / p90 ${pct(0.9)} / max ${pct(1)} ms; ` +
        `in the outage's first 2 s ${between(counter.signals, outageAt, outageAt + 2_000)} signals (${between(counter.failureSignals, outageAt, outageAt + 2_000)} carrying failures or stalls); ` +
        `${neverRefused} workers never refused; ${recorder.errors} errors${recorder.notes.length ? ` (first: ${recorder.notes[0]})` : ''}; load average ${f.loadAverage.map((l) => l.toFixed(2)).join(' ')}`,
    );
    const per5s: number[] = [];
    for (let t = startAt; t < endAt; t += 5_000) per5s.push(between(counter.signals, t, Math.min(endAt, t + 5_000)));
    o.log(
      `load: ${o.workers} workers: signals per 5 s from the start (the outage from ${Math.round((outageAt - startAt) / 1000)} s): ${per5s.join(' ')}`,
    );
    return f;
  } finally {
    await server.close();
  }
}
