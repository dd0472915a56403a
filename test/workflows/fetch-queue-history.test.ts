import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { packageRoot } from '../../src/client/local-server';
import { fetchTaskQueue } from '../../src/messages/activities';
import { FETCH_TASK_QUEUE_PATCH } from '../../src/workflows/mosaic-block';

// What the committed fixtures (replayed by replay.test.ts) hold about where fetch batches were scheduled.

interface Event {
  eventType?: string;
  markerRecordedEventAttributes?: { markerName?: string; details?: Record<string, { payloads?: { data?: string }[] }> };
  workflowExecutionStartedEventAttributes?: { taskQueue?: { name?: string } };
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string }; taskQueue?: { name?: string } };
}

function fixture(name: string): { queue: string; fetchQueues: string[]; patches: string[] } {
  const h = JSON.parse(readFileSync(path.join(packageRoot(), 'test', 'histories', `${name}.json`), 'utf8')) as { events: Event[] };
  const queue = h.events[0]!.workflowExecutionStartedEventAttributes!.taskQueue!.name!;
  const fetchQueues = h.events.flatMap((e) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name === 'fetchMosaicBatch' ? [e.activityTaskScheduledEventAttributes.taskQueue?.name ?? ''] : [],
  );
  const patches = h.events.flatMap((e) => {
    const d = e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
    return e.markerRecordedEventAttributes?.markerName === 'core_patch' && d ? [String((JSON.parse(Buffer.from(d, 'base64').toString()) as { id?: string }).id)] : [];
  });
  return { queue, fetchQueues, patches };
}

test('a run recorded with the fetch queue: the fetch-task-queue marker, and every fetch batch scheduled on <task queue>-fetch', () => {
  const f = fixture('mosaic-fetch-queue');
  assert.ok(f.patches.includes(FETCH_TASK_QUEUE_PATCH), `markers: ${f.patches.join(', ')}`);
  assert.ok(f.fetchQueues.length > 0);
  assert.deepEqual([...new Set(f.fetchQueues)], [fetchTaskQueue(f.queue)]);
});

test('a run recorded before: no marker, fetch batches on the workflow task queue (and it still replays: replay.test.ts)', () => {
  const f = fixture('mosaic-fail-fast-outage');
  assert.ok(!f.patches.includes(FETCH_TASK_QUEUE_PATCH));
  assert.ok(f.fetchQueues.length > 0);
  assert.deepEqual([...new Set(f.fetchQueues)], [f.queue]);
});
