import assert from 'node:assert/strict';
import { test } from 'node:test';
import { breakerView, initialState, parsePolicyConfig, step } from '../../src/breaker';
import { formatAdmin, formatList } from '../../src/cli/breaker/format';
import type { AdminResult } from '../../src/client/breakers';

/** An arbitrary instant far from today: 2001-03-04 05:06:07 UTC. */
const T0 = Date.UTC(2001, 2, 4, 5, 6, 7);

test('breaker list shows a closed breaker that a Retry-After paced, until when, and nothing once the pause is over', () => {
  const paced = step(
    initialState(parsePolicyConfig({})),
    { type: 'report', counts: { 'rate-limited': 1 }, rateLimitedForMs: 2_000 },
    T0,
    0.5,
  ).state;
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
  assert.match(
    listed(T0 + 500),
    /closed\s+https:\/\/tiles\.example\.test:443\s+paced \(Retry-After\) until 2001-03-04T05:06:09\.000Z \(in 1\.5s\)/,
  );
  assert.doesNotMatch(listed(T0 + 2_000), /paced/);
});

test('a forced-closed breaker reads as such in list and in an admin result: it never trips until reset', () => {
  const forced = step(initialState(parsePolicyConfig({})), { type: 'force-close' }, T0, 0.5).state;
  const view = breakerView(forced);
  const listed = formatList(
    {
      breakers: [
        {
          key: 'https://tiles.example.test:443',
          workflowId: 'breaker/x',
          runId: 'r',
          state: 'forced-closed',
          stateFrom: 'search-attribute',
          view,
          startTime: new Date(T0),
          taskQueue: 'q',
        },
      ],
      query: '',
      filteredBy: null,
    },
    undefined,
    T0,
  );
  assert.match(
    listed,
    /forced-closed\s+https:\/\/tiles\.example\.test:443\s+forced closed: never trips until `breaker reset` or `breaker close`$/m,
  );
  const result = {
    key: 'https://tiles.example.test:443',
    action: 'force-close',
    confirmed: true,
    transition: null,
    status: { view },
  } as unknown as AdminResult;
  assert.equal(
    formatAdmin(result, T0, 'force-close').split('\n')[0],
    'breaker https://tiles.example.test:443: force-close done; state now forced-closed: never trips until `breaker reset` or `breaker close`',
  );
  // `close` sends a reset: it says so, and that the breaker is automatic again.
  const reset = step(forced, { type: 'reset' }, T0, 0.5).state;
  const closed = { ...result, action: 'reset', status: { view: breakerView(reset) } } as unknown as AdminResult;
  assert.equal(
    formatAdmin(closed, T0, 'close').split('\n')[0],
    'breaker https://tiles.example.test:443: close (reset) done; state now closed (automatic: trips again on failures)',
  );
});
