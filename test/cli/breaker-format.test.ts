import assert from 'node:assert/strict';
import { test } from 'node:test';
import { breakerView, initialState, parsePolicyConfig, step } from '../../src/breaker';
import { formatList } from '../../src/cli/breaker-commands';

/** An arbitrary instant far from today: 2001-03-04 05:06:07 UTC. */
const T0 = Date.UTC(2001, 2, 4, 5, 6, 7);

test('breaker list shows a closed breaker that a 429 paced, until when, and nothing once the pause is over', () => {
  const paced = step(initialState(parsePolicyConfig({})), { type: 'report', counts: { 'rate-limited': 1 }, rateLimitedForMs: 2_000 }, T0, 0.5).state;
  const listed = (now: number) =>
    formatList(
      {
        breakers: [
          {
            key: 'https://tiles.example.test:443',
            workflowId: 'breaker/x',
            runId: 'r',
            state: 'closed',
            stateFrom: 'search-attribute',
            view: breakerView(paced),
            startTime: new Date(T0),
            taskQueue: 'q',
          },
        ],
        query: '',
        filteredBy: null,
      },
      undefined,
      now,
    );
  assert.match(listed(T0 + 500), /closed\s+https:\/\/tiles\.example\.test:443\s+paced \(429\) until 2001-03-04T05:06:09\.000Z \(in 1\.5s\)/);
  assert.doesNotMatch(listed(T0 + 2_000), /paced/);
});
