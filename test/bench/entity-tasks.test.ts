import assert from 'node:assert/strict';
import { test } from 'node:test';
import { entityTaskLine, taskFigures } from '../../bench/outage/entity-tasks';

type History = Parameters<typeof taskFigures>[0][number];

/** An event at `ms` past an arbitrary instant (2001), with the given attributes. */
const at = (eventId: number, ms: number, attrs: object) => ({
  eventId,
  eventTime: { seconds: 978_307_200 + Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 },
  ...attrs,
});

test("bench:outage's entity task figures: each task from scheduled to completed, over every run, timeouts and the largest carry counted", () => {
  const run1 = {
    events: [
      at(1, 0, { workflowExecutionStartedEventAttributes: {} }),
      at(2, 0, { workflowTaskScheduledEventAttributes: {} }),
      at(3, 5, { workflowTaskStartedEventAttributes: { scheduledEventId: 2 } }),
      at(4, 20, { workflowTaskCompletedEventAttributes: { scheduledEventId: 2, startedEventId: 3 } }),
      at(5, 1_000, { workflowTaskScheduledEventAttributes: {} }),
      at(6, 1_001, { workflowTaskStartedEventAttributes: { scheduledEventId: 5 } }),
      at(7, 11_001, { workflowTaskTimedOutEventAttributes: { scheduledEventId: 5 } }),
      at(8, 11_001, { workflowTaskScheduledEventAttributes: {} }),
      at(9, 11_002, { workflowTaskStartedEventAttributes: { scheduledEventId: 8 } }),
      at(10, 11_500, { workflowTaskCompletedEventAttributes: { scheduledEventId: 8, startedEventId: 9 } }),
      at(11, 11_500, {
        workflowExecutionContinuedAsNewEventAttributes: { input: { payloads: [{ data: new Uint8Array(31_017) }] } },
      }),
    ],
  } as unknown as History;
  const run2 = {
    events: [
      at(1, 12_000, { workflowTaskScheduledEventAttributes: {} }),
      at(2, 12_100, { workflowTaskCompletedEventAttributes: { scheduledEventId: 1 } }),
    ],
  } as unknown as History;
  const f = taskFigures([run1, run2]);
  assert.deepEqual(f, { n: 3, p50Ms: 100, p99Ms: 499, maxMs: 499, timeouts: 1, runs: 2, carriedBytes: 31_017 });
  assert.equal(
    entityTaskLine(f),
    '  entity workflow tasks: n=3 p50=100 p99=499 max=499 timeouts=1 runs=2 carried-bytes=31017',
  );
});
