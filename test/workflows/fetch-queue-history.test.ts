import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { packageRoot } from '../../src/client/local-server';
import { fetchTaskQueue } from '../../src/messages/activities';
import type { MosaicPlan } from '../../src/messages/mosaic-types';

// What the committed fixtures (replayed by replay.test.ts) hold about where fetch batches were scheduled: the
// plan decides it.

interface Payloads {
  payloads?: { data?: string }[];
}
interface Event {
  eventId?: string;
  workflowExecutionStartedEventAttributes?: { taskQueue?: { name?: string } };
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string }; taskQueue?: { name?: string } };
  activityTaskCompletedEventAttributes?: { scheduledEventId?: string; result?: Payloads };
  activityTaskTimedOutEventAttributes?: { scheduledEventId?: string };
}

function fixture(name: string): { queue: string; fetchQueues: string[]; timedOut: number; plan: MosaicPlan } {
  const h = JSON.parse(readFileSync(path.join(packageRoot(), 'test', 'histories', `${name}.json`), 'utf8')) as {
    events: Event[];
  };
  const queue = h.events[0]!.workflowExecutionStartedEventAttributes!.taskQueue!.name!;
  const types = new Map(
    h.events.flatMap((e) =>
      e.activityTaskScheduledEventAttributes
        ? [[String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name]]
        : [],
    ),
  );
  const fetchQueues = h.events.flatMap((e) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name === 'fetchMosaicBatch'
      ? [e.activityTaskScheduledEventAttributes.taskQueue?.name ?? '']
      : [],
  );
  const planDone = h.events.find(
    (e) =>
      e.activityTaskCompletedEventAttributes &&
      types.get(String(e.activityTaskCompletedEventAttributes.scheduledEventId)) === 'planMosaic',
  );
  const data = planDone!.activityTaskCompletedEventAttributes!.result!.payloads![0]!.data!;
  const timedOut = h.events.filter(
    (e) =>
      e.activityTaskTimedOutEventAttributes &&
      types.get(String(e.activityTaskTimedOutEventAttributes.scheduledEventId)) === 'fetchMosaicBatch',
  ).length;
  return { queue, fetchQueues, timedOut, plan: JSON.parse(Buffer.from(data, 'base64').toString()) as MosaicPlan };
}

test('a run recorded while a worker polled <task queue>-fetch: the plan names it, and every fetch batch was scheduled there', () => {
  const f = fixture('mosaic-fetch-queue-routed');
  assert.equal(f.plan.fetchQueue?.taskQueue, fetchTaskQueue(f.queue));
  assert.ok(f.fetchQueues.length > 0);
  assert.deepEqual([...new Set(f.fetchQueues)], [fetchTaskQueue(f.queue)]);
});

test('a run recorded after its fetch worker had gone: the plan names <task queue>-fetch, and each batch timed out there unstarted and ran on the workflow task queue', () => {
  const f = fixture('mosaic-fetch-queue-fallback');
  assert.equal(f.plan.fetchQueue?.taskQueue, fetchTaskQueue(f.queue));
  assert.equal(f.plan.fetchQueue?.startWithinMs, 1_000);
  const onFetch = f.fetchQueues.filter((q) => q === fetchTaskQueue(f.queue)).length;
  assert.ok(onFetch > 0);
  assert.equal(f.timedOut, onFetch, 'every batch on the fetch queue timed out');
  assert.equal(
    f.fetchQueues.filter((q) => q === f.queue).length,
    onFetch,
    'one batch on the main queue for each that timed out',
  );
  assert.equal(f.fetchQueues.length, 2 * onFetch);
});
