import { setTimeout as delay } from 'node:timers/promises';
import { pausedForMs } from '../../breaker';
import type { BreakerGuard } from '../guard';
import type { AwaitBreakerInput, AwaitBreakerResult } from '../../messages/activities';
import { activityContext } from '../activity-context';

/** How often the breaker's state is read while waiting (the guard's cached view: about one read a second). */
const POLL_MS = 500;
/** States that refuse traffic: anything else (closed, half-open, forced closed, disabled) ends the wait. */
const REFUSING = new Set(['open', 'forced-open']);

/**
 * A mosaic waiting under `wait` watches its breaker instead of sleeping blind: an operator's `breaker close` or
 * `reset`, a maintenance window ended early, or a cooldown's end wakes it within a second, not at the end of a
 * wait that can last minutes. One activity per wait, whatever its length, so the history stays small.
 */
export function makeAwaitBreaker(deps: { guard?: Pick<BreakerGuard, 'view'> }) {
  return async function awaitBreaker(input: AwaitBreakerInput): Promise<AwaitBreakerResult> {
    const ctx = activityContext();
    const started = Date.now();
    const forMs = Math.max(0, Math.min(Number(input.forMs) || 0, 3_600_000));
    const end = started + forMs;
    for (;;) {
      const view = deps.guard ? await deps.guard.view(String(input.key)).catch(() => undefined) : null;
      // No entity at all (it ended idle, or was never started): nothing refuses.
      if (view === null) return { state: null, woke: true, waitedMs: Date.now() - started };
      // Unreachable (undefined): keep waiting out the time the breaker gave, as the sleep did. A closed breaker
      // that a 429 paused (calls refused for a long Retry-After) lets traffic through when the pause ends.
      if (view && !REFUSING.has(view.state) && pausedForMs(view, Date.now()) === 0)
        return { state: view.state, woke: true, waitedMs: Date.now() - started };
      const left = end - Date.now();
      if (left <= 0 || ctx?.cancellationSignal.aborted)
        return { state: view?.state ?? null, woke: false, waitedMs: Date.now() - started };
      ctx?.heartbeat();
      await delay(Math.min(POLL_MS, left), undefined, ctx ? { signal: ctx.cancellationSignal } : {}).catch(
        () => undefined,
      );
    }
  };
}
