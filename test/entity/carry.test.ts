import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import {
  figures,
  fastFigures,
  histogramOf,
  initialState,
  parsePolicyConfig,
  record,
  type TransitionRecord,
} from '../../src/breaker';
import type { CarriedState, EntityInput } from '../../src/messages/breaker';
import { carry, LOG_CARRIED, restore } from '../../src/workflows/breaker-entity/carry';
import { entityOptions } from '../../src/workflows/breaker-entity/config';
import { worstCarried, WORST_CONFIG } from '../helpers/carried-worst-case';

const T0 = Date.UTC(2001, 2, 3, 4, 5, 6);
const LIMIT = 64 * 1024;

/** The continue-as-new input as the entity sends it, encoded as Temporal encodes it. */
function payloadBytes(carried: CarriedState): number {
  const input: EntityInput = {
    key: 'https://tiles.example.com:443/layer',
    config: WORST_CONFIG,
    probe: { url: 'https://tiles.example.com/layer/0/0/0.png', contentTypePrefix: 'image/', timeoutMs: 10_000 },
    options: { searchAttributes: 'auto' },
    carried,
  };
  return defaultPayloadConverter.toPayload(input).data!.length;
}

describe('the continue-as-new payload', () => {
  test('is under 64 KB for the largest state the configuration allows', () => {
    const old = worstCarried(T0);
    // The state as runs before the bound carried it is far over (so this case means something) ...
    assert.ok(payloadBytes(old) > 10 * LIMIT, `the old form is ${payloadBytes(old)} bytes`);
    // ... and in the bounded form it is under 64 KB.
    const bytes = payloadBytes(carry(restore(old), T0));
    assert.ok(bytes < LIMIT, `carried ${bytes} bytes`);
  });

  test('keeps what the next run needs: the policy, its figures, the newest transitions whole and 200+ in brief', () => {
    const old = worstCarried(T0);
    const back = restore(carry(restore(old), T0));
    const config = back.policy.config;
    // Nothing leaves the window at the carry, however much it was merged to fit.
    assert.deepEqual(figures(back.policy.window, T0, config), figures(old.policy.window, T0, config));
    assert.deepEqual({ ...back.policy, window: [] }, { ...old.policy, window: [] });
    assert.deepEqual(back.counters, old.counters);
    assert.equal(back.operatorSet, true);
    assert.ok(back.log.length >= 200 && back.log.length <= LOG_CARRIED, `${back.log.length} transitions`);
    // Every carried transition says when, from, to and why (enough for open intervals and their reasons) ...
    back.log.forEach((t, i) =>
      assert.deepEqual(
        [t.at, t.from, t.to, t.reason, t.cooldownMs],
        [old.log[i]!.at, 'half-open', 'open', 'probe-failed', 240_000],
      ),
    );
    // ... the newest with their figures and who, cut to a bounded length.
    assert.deepEqual(back.log[0]!.figures, old.log[0]!.figures);
    assert.ok(back.log[0]!.actor!.startsWith('xxx') && back.log[0]!.actor!.length <= 200);
    // The newest decisions and reporters.
    assert.deepEqual(back.decisions.at(-1), old.decisions.at(-1));
    assert.ok(back.reporters.some(([id]) => id === old.reporters![0]![0]));
  });

  test('a window that fits is carried bucket for bucket, the fast window included', () => {
    const config = parsePolicyConfig({});
    let window = initialState(config).window;
    for (let t = T0 - 29_000; t <= T0; t += 100)
      window = record(
        window,
        t,
        { success: 3, transient: t % 700 === 0 ? 1 : 0 },
        histogramOf([120, 150, 180]),
        config,
      );
    const policy = { ...initialState(config), window };
    const back = restore(
      carry(
        { ...restore({ policy, log: [], lastReportAt: T0, decisions: [], counters: worstCarried(T0).counters }) },
        T0,
      ),
    );
    assert.deepEqual(back.policy.window, window);
    assert.deepEqual(fastFigures(back.policy.window, T0, config), fastFigures(window, T0, config));
  });

  test('a shadow transition (metrics-only) stays a shadow in brief', () => {
    const shadow: TransitionRecord = {
      at: T0 - 60_000,
      from: 'closed',
      to: 'open',
      reason: 'failure-ratio',
      detail: 'would trip',
      shadow: true,
    };
    const log = [
      ...Array.from({ length: 20 }, (_, i): TransitionRecord => ({
        at: T0 - i,
        from: 'closed',
        to: 'forced-open',
        reason: 'forced-open',
        detail: 'maintenance',
      })),
      shadow,
    ];
    const parts = restore({
      policy: initialState(parsePolicyConfig({})),
      log,
      lastReportAt: T0,
      decisions: [],
      counters: worstCarried(T0).counters,
    });
    const back = restore(carry(parts, T0));
    assert.deepEqual(back.log[20], { ...shadow, detail: '' });
  });

  test('a payload from before the bound is read as it is', () => {
    const old = worstCarried(T0);
    const parts = restore(old);
    assert.deepEqual(parts.log, old.log);
    assert.deepEqual(parts.policy, old.policy);
    assert.deepEqual(parts.decisions, old.decisions);
  });
});

describe('the history limit', () => {
  test('runs continue as new after 1,000 events unless told otherwise', () => {
    assert.equal(entityOptions(undefined).maxHistoryEvents, 1_000);
    assert.equal(entityOptions({ maxHistoryEvents: 5_000 }).maxHistoryEvents, 5_000);
  });
});
