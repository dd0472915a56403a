import { BrokenCircuitError, CircuitState, SamplingBreaker, circuitBreaker, handleAll } from 'cockatiel';
import { isFailure, type OutcomeKind } from '../../src/breaker/outcome';
import { sleep } from './clock';
import { refusalWaitMs, tileUrl, type ModeContext } from './fleet';
import { withRetry } from './retry';
import type { Scenario } from './types';

/** A tile whose retried fetch still failed: what the per-process breaker counts as one failure. */
class TileFailed extends Error {
  constructor(readonly outcome: OutcomeKind) {
    super(`tile failed: ${outcome}`);
  }
}

/**
 * cockatiel's SamplingBreaker set as close to our policy as it allows (see PER_PROCESS_DIFFERENCES):
 * - `threshold`: cockatiel opens when failures > threshold x total, ours when failures / n >= ratio; with
 *   integer counts, ratio minus a hair turns cockatiel's strict test into ours.
 * - `duration`: the window (30 s); cockatiel cuts it into max(5, ceil(duration / 1 s)) buckets: 30 x 1 s,
 *   the same buckets as our bucketMs = 1000.
 * - `minimumRps`: cockatiel refuses to open while total < duration x minimumRps / 1000; minSamples x 1000 /
 *   duration (0.667 rps for 20 samples over 30 s) makes that "n >= minSamples" (a hair below, so floating
 *   point cannot turn 20 into 20.000000000000004).
 * - `halfOpenAfter`: the cooldown, constant (our bench config uses cooldownMultiplier 1, jitter 0).
 */
export function cockatielBreakerOptions(breaker: Scenario['breaker']) {
  const buckets = Math.max(5, Math.ceil(breaker.windowMs / 1000));
  const duration = Math.round(breaker.windowMs / buckets) * buckets;
  return {
    threshold: breaker.failureRatio - 1e-9,
    duration: breaker.windowMs,
    minimumRps: ((breaker.minSamples - 1e-6) * 1000) / duration,
    halfOpenAfter: breaker.cooldownMs,
  };
}

/** What still differs between the per-process cockatiel breakers and tilebreaker's policy in this run. */
export const PER_PROCESS_DIFFERENCES: readonly string[] = [
  'scope: one breaker per simulated worker (60 separate discoveries and 60 separate probe streams), not one per endpoint for the fleet',
  'window: cockatiel advances its 1 s buckets only when a call is recorded, one bucket per call, so after an idle stretch old buckets linger (a window of the last 30 buckets that saw calls, not the last 30 s); with back-to-back traffic it is the same 30 s',
  "window: cockatiel's buckets start at the first call after the previous one ended (not aligned to 1 s boundaries); outcomes are counted when each call ends, in the worker itself, with no reporting delay",
  "half-open: cockatiel lets the first call after the cooldown through as the test and makes the worker's other calls wait for its result (ours refuses them: 'busy'); with one call at a time per worker this never differs here",
  'half-open: one successful test closes (bench config probesToClose = 1 for ours too); a failed test re-opens for the same constant 1 s (ours: cooldownMultiplier 1, jitter 0 in the bench; our defaults would grow and jitter it)',
  'after closing: cockatiel lets all traffic back at once; ours ramps the allowance from rampFloor to 1 over rampMs',
  'no latency rule, no permanent-fault surge rule, no Retry-After lengthening of the cooldown, no self-probe when idle, no lease or fencing on the test call',
  'classification: cockatiel counts any call that did not throw as a success; neutral / rate-limited / permanent outcomes (never produced by this server) would count as successes there and as neither in ours',
];

/**
 * `per-process`: one cockatiel circuit breaker per simulated worker around the same retry policy. The breaker
 * wraps the whole retried tile fetch: one breaker outcome per tile (the shared mode asks the guard per attempt,
 * as the pipeline does).
 * While open, a worker waits out the rest of its own cooldown (at most 1 s) instead of spinning on
 * BrokenCircuitError, the same waiting rule the shared mode applies to a refusal.
 */
export async function runPerProcessMode(ctx: ModeContext): Promise<void> {
  const { scenario, recorder } = ctx;
  const opts = cockatielBreakerOptions(scenario.breaker);
  await ctx.runFleet((fetcher) => {
    const worker = fetcher.worker;
    const breaker = circuitBreaker(handleAll, {
      halfOpenAfter: opts.halfOpenAfter,
      breaker: new SamplingBreaker({ threshold: opts.threshold, duration: opts.duration, minimumRps: opts.minimumRps }),
    });
    // cockatiel times its cooldown with Date.now(); so does this worker's wait.
    let openedAt = 0;
    breaker.onBreak(() => {
      openedAt = Date.now();
      recorder.view(worker, 'opened');
    });
    breaker.onHalfOpen(() => recorder.view(worker, 'half-open'));
    breaker.onReset(() => recorder.view(worker, 'closed'));
    return {
      async step(seq, deadline) {
        const url = tileUrl(ctx.baseUrl, worker, seq);
        try {
          await breaker.execute(async () => {
            // Inside the call: not closed means this call is the breaker's half-open test.
            const probe = breaker.state !== CircuitState.Closed;
            const attempts = probe ? scenario.probeAttempts : scenario.retry.attempts;
            const { last } = await withRetry(() => fetcher.attempt(url, probe), scenario.retry, attempts, deadline);
            if (isFailure(last.kind)) throw new TileFailed(last.kind);
          });
        } catch (err) {
          if (err instanceof BrokenCircuitError) {
            recorder.view(worker, 'refused');
            await sleep(refusalWaitMs(openedAt + opts.halfOpenAfter - Date.now()));
          } else if (!(err instanceof TileFailed)) {
            throw err;
          }
          // A failed tile: the pipeline's fallback (dead letter) and on to the next tile.
        }
      },
    };
  });
}
