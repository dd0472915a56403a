import { isCancellation, proxyActivities, sleep } from '@temporalio/workflow';
import { breakerKey, type BreakerStateName } from '../breaker';
import type { MosaicActivities } from '../messages/activities';
import type { MosaicPlan } from '../messages/mosaic-types';
import type { ProgressTracker } from './mosaic-progress';

/** A wait with no Retry-After from the breaker, and the bounds of any wait. */
const DEFAULT_WAIT_MS = 5_000;
const MIN_WAIT_MS = 1_000;
const MAX_WAIT_MS = 10 * 60_000;
/**
 * A wait the breaker asked for (its retryAfter) that an activity watches may last this long: the watch ends
 * it within a second of the breaker letting traffic through, so waiting out a long cooldown in one piece
 * loses nothing, and a week against a server that stays down takes about 170 passes, not 1,000.
 */
const MAX_WATCHED_WAIT_MS = 60 * 60_000;

/** The breaker a plan's fetches go through (one per source: its endpoint, and its partition if it has one). */
export const planBreakerKey = (plan: MosaicPlan): string =>
  breakerKey(plan.source.url, plan.source.breakerPartition ? { partition: plan.source.breakerPartition } : {});

const { awaitBreaker } = proxyActivities<MosaicActivities>({
  // A wait lasts at most MAX_WATCHED_WAIT_MS; the activity returns by itself at the end of it.
  startToCloseTimeout: '70m',
  heartbeatTimeout: '30s',
  retry: { initialInterval: '1s', maximumAttempts: 2 },
});
/** Shorter waits are plain timers: watching would not wake them sooner in any way that matters. */
const WATCH_FROM_MS = 5_000;

/** Whether a wait of this length is watched. */
function watches(plan: MosaicPlan, state: BreakerStateName | null, waitMs: number): boolean {
  return plan.breaker && state !== null && waitMs >= WATCH_FROM_MS;
}

/**
 * Waits out a refusing breaker: on a durable timer, or, for a longer wait, by an activity that watches the
 * breaker and returns as soon as it lets traffic through (an operator's close or reset, a maintenance window
 * ended early, the cooldown's end), so waiting mosaics resume within a second.
 */
async function waitForBreaker(plan: MosaicPlan, state: BreakerStateName | null, waitMs: number): Promise<void> {
  if (!watches(plan, state, waitMs)) {
    await sleep(waitMs);
    return;
  }
  const until = Date.now() + waitMs;
  try {
    await awaitBreaker({ key: planBreakerKey(plan), forMs: waitMs });
  } catch (err) {
    // No worker could watch (or the watch failed): sleep what is left, as before.
    if (isCancellation(err)) throw err;
    if (until > Date.now()) await sleep(until - Date.now());
  }
}

/**
 * The wait between a `wait` pass and the next, bounded by the deadline, and longer after each pass that got
 * nothing through (`futile` in a row). But when the breaker said when to come back (`told`), come back then: a
 * futile retry pass costs only the guard's refusals (one batch first), and the grown backoff left a short
 * cooldown's recovery unseen for seconds. What the breaker asked for may be waited in one piece when watched.
 */
export async function waitBetweenPasses(
  plan: MosaicPlan,
  tracker: ProgressTracker,
  w: { futile: number; told: number | null; state: BreakerStateName | null },
): Promise<void> {
  const { futile, told, state } = w;
  const backoff = Math.min(MAX_WAIT_MS, DEFAULT_WAIT_MS * 2 ** Math.max(0, futile - 1));
  const cap =
    told !== null && told > MAX_WAIT_MS && watches(plan, state, MAX_WAIT_MS) ? MAX_WATCHED_WAIT_MS : MAX_WAIT_MS;
  const wanted = Math.max(MIN_WAIT_MS, Math.min(cap, told ?? (futile > 1 ? backoff : DEFAULT_WAIT_MS)));
  const waitMs = Math.max(0, Math.min(wanted, plan.deadlineAt! - Date.now()));
  tracker.progress.phase = 'waiting';
  tracker.progress.waitingUntil = Date.now() + waitMs;
  tracker.progress.waitingFor =
    plan.breaker && state !== null ? { key: planBreakerKey(plan), state, deadlineAt: plan.deadlineAt } : null;
  if (waitMs > 0) await waitForBreaker(plan, state, waitMs);
  tracker.progress.waitingUntil = null;
  tracker.progress.waitingFor = null;
}
