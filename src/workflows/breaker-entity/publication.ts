import { log, proxyActivities, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { BreakerStateName, BreakerView } from '../../breaker';
import type { BreakerActivities } from '../../messages/activities';
import { BREAKER_KEY, BREAKER_STATE } from '../../messages/search-attributes';

/**
 * What the entity shows outside its queries: its view in the memo, and the BreakerState / BreakerKey search
 * attributes (`temporal workflow list --query 'BreakerState="open"'`).
 */
export class Publication {
  // The view also goes into the memo, where guards read it with DescribeWorkflowExecution: the server answers
  // that from its own store, so a read never queues behind the entity's workflow tasks as a query does while
  // a fleet's reports pour in.
  private memoView = '';

  constructor(private readonly key: string) {}

  /** Puts the view in the memo when it changed. */
  view(v: () => BreakerView): void {
    const view = v();
    const text = JSON.stringify(view);
    if (text === this.memoView) return;
    this.memoView = text;
    upsertMemo({ view });
  }

  /** Keeps the search attributes current, where the namespace has them (`on`). */
  state(name: BreakerStateName, on: boolean | null): void {
    if (!on) return;
    upsertSearchAttributes([
      { key: BREAKER_STATE, value: name },
      { key: BREAKER_KEY, value: this.key },
    ]);
  }
}

/**
 * Whether the namespace has the search attributes registered, asked once by an activity (upserting an
 * unregistered one would fail every workflow task). No answer counts as no.
 */
export async function searchAttributesRegistered(key: string): Promise<boolean> {
  let on: boolean;
  try {
    const check = proxyActivities<BreakerActivities>({
      startToCloseTimeout: '10s',
      scheduleToCloseTimeout: '30s',
      retry: { maximumAttempts: 2 },
    });
    on = await check.breakerSearchAttributesRegistered();
  } catch (err) {
    on = false;
    log.warn('could not check the search attributes; not keeping them', {
      key,
      error: err instanceof Error ? err.message : String(err),
    });
  }
  if (!on)
    log.warn('BreakerState / BreakerKey are not registered in this namespace: breakers will not be listable by state', {
      key,
    });
  return on;
}
