/**
 * `--scenario poisoned`: 60 simulated workers against a healthy tile server, one of them (the bad worker)
 * failing every call locally: its resolver fails (ENOTFOUND), so no call of it ever reaches the server. The
 * pipeline's own fetch (fetchUrl) and classification (classify: `local`) judge its calls; the other workers
 * fetch as in the outage benchmark.
 *
 *   shared        tilebreaker's BreakerGuard and breaker entity on a real Temporal dev server: the quorum keeps
 *                 the bad worker's failures from opening the fleet's breaker (they are `local` and never
 *                 reported anyway), and its own guard quarantines it;
 *   per-process   one cockatiel breaker per worker, beside it: the bad worker's own breaker opens on its failures.
 *
 * Figures: fleet-opened (the fleet's breaker opened at all), good-refused (calls of healthy workers refused by
 * any breaker: the fleet's, or their own), bad-requests (calls the bad worker attempted), quarantine-s (from the
 * bad worker's first failure until its guard refuses its calls; per-process: until its own breaker does).
 */
import { BrokenCircuitError, SamplingBreaker, circuitBreaker, handleAll } from 'cockatiel';
import { Agent } from 'undici';
import { BreakerGuard } from '../../src/activities/guard';
import { fetchUrl } from '../../src/activities/http/fetch-url';
import { classify } from '../../src/activities/validate/classify';
import { isFailure, type OutcomeKind, type TransitionRecord } from '../../src/breaker';
import { breakerKey, breakerWorkflowId } from '../../src/breaker/key';
import { statusQuery, transitionsQuery } from '../../src/messages/breaker';
import { startBenchTemporal } from './bench-temporal';
import { now, sleep } from './clock';
import { makeModeContext, refusalWaitMs, tileUrl } from './fleet';
import { cockatielBreakerOptions } from './per-process';
import { ModeRecorder } from './recorder';
import { withRetry } from './retry';
import { OutageServerProcess } from './server-client';
import { sharedPolicyConfig } from './shared-mode';
import type { ModeName, Scenario } from './types';

export interface PoisonedOptions {
  workers: number;
  /** How long the fleet runs, ms. */
  durationMs: number;
  tileLatencyMs: number;
  /** Which worker fails locally. */
  badWorker: number;
}

export interface PoisonedFigures {
  fleetOpened: 0 | 1;
  goodRefused: number;
  badRequests: number;
  /** Seconds from the bad worker's first failure until its breaker (guard) refused a call; null: never. */
  quarantineS: number | null;
  goodRequests: number;
  /** shared only: the entity's declined trips (quorum not met) and the reporters it saw failing alone. */
  declined?: number;
  loneFailers?: string[];
}

/** A resolver that fails every lookup, as a worker's broken /etc/resolv.conf or DNS server would. */
function failingLookup(host: string, _opts: unknown, cb: (err: Error) => void): void {
  const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), {
    code: 'ENOTFOUND',
    syscall: 'getaddrinfo',
    hostname: host,
  });
  process.nextTick(() => cb(err));
}

/** The bad worker's calls: the pipeline's fetch and classification through an Agent whose resolver fails. */
class PoisonedFetcher {
  private readonly agent = new Agent({ connect: { lookup: failingLookup as never, timeout: 2_000 } });
  attempts = 0;
  firstFailureAt: number | null = null;

  constructor(private readonly port: string) {}

  async attempt(seq: number): Promise<{ kind: OutcomeKind; latencyMs: number }> {
    this.attempts++;
    // The same endpoint by name (the others reach it by address): only this worker needs a lookup, and it fails.
    const url = tileUrl(`http://tiles.localhost.test:${this.port}`, 999, seq);
    const x = await fetchUrl(url, { dispatcher: this.agent, headers: {} });
    const v = await classify(x, { width: null, height: null, blankIsFailure: false });
    if (v.kind !== 'success' && this.firstFailureAt === null) this.firstFailureAt = now();
    return { kind: v.kind, latencyMs: v.latencyMs };
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

function scenarioOf(o: PoisonedOptions): Scenario {
  return {
    workers: o.workers,
    healthyMs: o.durationMs,
    outageMs: 0,
    recoveryMs: 0,
    outageKind: '503',
    retryAfterSec: null,
    tileLatencyMs: o.tileLatencyMs,
    retry: { attempts: 3, baseMs: 100, capMs: 2_000 },
    probeAttempts: 1,
    rampMs: null,
    breaker: { windowMs: 30_000, minSamples: 20, failureRatio: 0.5, cooldownMs: 1_000 },
  };
}

/** Runs one mode of the scenario on a fresh tile server. */
async function runMode(mode: ModeName, o: PoisonedOptions, log: (m: string) => void): Promise<PoisonedFigures> {
  const scenario = scenarioOf(o);
  const server = await OutageServerProcess.spawn(scenario.tileLatencyMs);
  const recorder = new ModeRecorder(mode);
  const ctx = makeModeContext(mode, scenario, server, recorder, log);
  const bad = new PoisonedFetcher(new URL(ctx.baseUrl).port);
  const fig: PoisonedFigures = { fleetOpened: 0, goodRefused: 0, badRequests: 0, quarantineS: null, goodRequests: 0 };
  let badRefusedAt: number | null = null;
  const refusedBy = (worker: number) => {
    if (worker !== o.badWorker) fig.goodRefused++;
    else if (badRefusedAt === null) badRefusedAt = now();
  };
  try {
    if (mode === 'shared') await runShared(ctx, o, bad, refusedBy, fig, log);
    else await runPerProcess(ctx, o, bad, refusedBy, fig);
  } finally {
    await bad.close();
    await server.close();
  }
  fig.badRequests = bad.attempts;
  fig.goodRequests = recorder.attempts.length;
  if (bad.firstFailureAt !== null && badRefusedAt !== null)
    fig.quarantineS = (badRefusedAt - bad.firstFailureAt) / 1000;
  if (recorder.errors) log(`${mode}: ${recorder.errors} errors: ${recorder.notes.join(' | ')}`);
  return fig;
}

async function runShared(
  ctx: ReturnType<typeof makeModeContext>,
  o: PoisonedOptions,
  bad: PoisonedFetcher,
  refusedBy: (worker: number) => void,
  fig: PoisonedFigures,
  log: (m: string) => void,
): Promise<void> {
  const temporal = await startBenchTemporal('poisoned', log);
  const { client, address, taskQueue } = temporal;
  log(`shared: Temporal at ${address}`);
  const key = breakerKey(ctx.baseUrl);
  // The benchmark's usual policy; the quorum is the new entity's default (2), as for any entity started now.
  const config = sharedPolicyConfig(ctx.scenario);
  try {
    await ctx.runFleet((fetcher) => {
      const w = fetcher.worker;
      const guard = new BreakerGuard({
        client,
        taskQueue,
        reporter: `sim-${w}`,
        config,
        logger: { warn: () => undefined },
      });
      return {
        async step(seq, deadline) {
          const decision = await guard.acquire(key);
          if (decision.kind === 'refused') {
            refusedBy(w);
            await sleep(refusalWaitMs(decision.retryAfterMs));
            return;
          }
          const { last } =
            w === o.badWorker
              ? await withRetry(() => bad.attempt(seq), ctx.scenario.retry, ctx.scenario.retry.attempts, deadline)
              : await withRetry(
                  () => fetcher.attempt(tileUrl(ctx.baseUrl, w, seq), decision.kind === 'probe'),
                  ctx.scenario.retry,
                  ctx.scenario.retry.attempts,
                  deadline,
                );
          guard.release(decision, { kind: last.kind, latencyMs: last.latencyMs });
          // A local failure is instant: a real batch's next tile goes through the slot and the guard again.
          if (last.kind !== 'success') await sleep(5);
        },
        async close() {
          await guard.close();
        },
      };
    });
    log('shared: fleet finished; reading the entity');
    const handle = client.workflow.getHandle(breakerWorkflowId(key));
    const transitions: TransitionRecord[] = await handle.query(transitionsQuery);
    fig.fleetOpened = transitions.some((t) => t.to === 'open') ? 1 : 0;
    const status = await handle.query(statusQuery);
    fig.declined = status.counters.quorumDeclined ?? 0;
    fig.loneFailers = (status.loneFailers ?? []).map((l) => l.reporter);
  } catch (err) {
    log(`shared: FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    throw err;
  } finally {
    await temporal.close();
  }
}

/** One cockatiel breaker per worker, as the outage benchmark's per-process mode sets it. */
async function runPerProcess(
  ctx: ReturnType<typeof makeModeContext>,
  o: PoisonedOptions,
  bad: PoisonedFetcher,
  refusedBy: (worker: number) => void,
  fig: PoisonedFigures,
): Promise<void> {
  const opts = cockatielBreakerOptions(ctx.scenario.breaker);
  await ctx.runFleet((fetcher) => {
    const w = fetcher.worker;
    const breaker = circuitBreaker(handleAll, {
      halfOpenAfter: opts.halfOpenAfter,
      breaker: new SamplingBreaker({ threshold: opts.threshold, duration: opts.duration, minimumRps: opts.minimumRps }),
    });
    let openedAt = 0;
    breaker.onBreak(() => (openedAt = Date.now()));
    return {
      async step(seq, deadline) {
        try {
          await breaker.execute(async () => {
            const { last } =
              w === o.badWorker
                ? await withRetry(() => bad.attempt(seq), ctx.scenario.retry, ctx.scenario.retry.attempts, deadline)
                : await withRetry(
                    () => fetcher.attempt(tileUrl(ctx.baseUrl, w, seq), false),
                    ctx.scenario.retry,
                    ctx.scenario.retry.attempts,
                    deadline,
                  );
            // A per-process breaker cannot tell the worker's own failures from the endpoint's: it counts both.
            if (isFailure(last.kind) || last.kind === 'local') throw new Error(`tile failed: ${last.kind}`);
          });
        } catch (err) {
          if (err instanceof BrokenCircuitError) {
            refusedBy(w);
            await sleep(refusalWaitMs(openedAt + opts.halfOpenAfter - Date.now()));
          } else {
            await sleep(5);
          }
        }
      },
    };
  });
  // Per-process breakers are the workers' own: none is the fleet's.
  fig.fleetOpened = 0;
}

function figuresLine(name: string, f: PoisonedFigures, quarantineName: string): string {
  const q = f.quarantineS === null ? 'never' : f.quarantineS.toFixed(2);
  return `${name}: fleet-opened=${f.fleetOpened} good-refused=${f.goodRefused} bad-requests=${f.badRequests} ${quarantineName}=${q}`;
}

/** Runs both modes and prints the report; the last line is the `poisoned: ...` line. */
export async function runPoisonedScenario(o: PoisonedOptions, log: (m: string) => void): Promise<void> {
  log(
    `poisoned: ${o.workers} workers, ${o.durationMs / 1000} s against a healthy server; worker ${o.badWorker} fails every call locally (its resolver: ENOTFOUND)`,
  );
  const perProcess = await runMode('per-process', o, log);
  log('per-process: done');
  const shared = await runMode('shared', o, log);
  log('shared: done');
  console.log('');
  console.log(
    `shared: ${shared.goodRequests} requests of healthy workers; the entity declined ${shared.declined ?? 0} trips (quorum not met); reporters it saw failing alone: ${(shared.loneFailers ?? []).join(', ') || 'none'}`,
  );
  console.log(
    `per-process (cockatiel, one breaker per worker): ${perProcess.goodRequests} requests of healthy workers`,
  );
  console.log(figuresLine('per-process', perProcess, 'open-s'));
  console.log(figuresLine('poisoned', shared, 'quarantine-s'));
}
