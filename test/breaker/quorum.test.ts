import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  histogramOf,
  initialState,
  packWindow,
  parsePolicyConfig,
  quorumFigures,
  reporterHash,
  step,
  unpackWindow,
  windowFigures,
  type OutcomeCounts,
  type PolicyConfig,
  type PolicyConfigInput,
  type PolicyState,
  type StepResult,
  type TransitionRecord,
} from '../../src/breaker';

/** What a new breaker entity runs on (breaker-entity/config.ts sets these for new entities). */
const ENTITY_DEFAULTS: PolicyConfigInput = {
  quorum: 2,
  smallFleetFloor: 3,
  probeIntervalMs: 5_000,
  probeBackoff: 2,
  slowCallMs: 10_000,
};
const T0 = 1_700_000_000_000;

/** A seeded PRNG (mulberry32): the trials are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Report {
  at: number;
  reporter: string;
  witness?: string;
  counts: Partial<OutcomeCounts>;
}

/** Applies the reports in time order; the first trip's time, or null. */
function firstTrip(config: PolicyConfig, reports: Report[]): { at: number; detail: string } | null {
  let s: PolicyState = initialState(config);
  for (const r of [...reports].sort((a, b) => a.at - b.at)) {
    const out: StepResult = step(
      s,
      { type: 'report', reporter: r.reporter, ...(r.witness ? { witness: r.witness } : {}), counts: r.counts },
      r.at,
      0.5,
    );
    s = out.state;
    const opened = out.transitions.find((t) => t.to === 'open');
    if (opened) return { at: r.at, detail: opened.detail };
  }
  return null;
}

/**
 * The crafted case: `healthy` workers at 10 calls/s, each reporting its successes once a second at its own
 * phase, and one worker whose own network fails: 40 failed calls every 0.5 s, from `sickFrom`.
 */
function sickWorkerFleet(rand: () => number, healthy: number, durationMs: number, sickFrom: number): Report[] {
  const reports: Report[] = [];
  for (let w = 0; w < healthy; w++) {
    const phase = Math.floor(rand() * 1_000);
    // Report timers drift: each report lands up to 100 ms after its second.
    for (let t = phase; t < durationMs; t += 1_000)
      reports.push({ at: T0 + t + Math.floor(rand() * 100), reporter: `good-${w}`, counts: { success: 10 } });
  }
  const sickPhase = Math.floor(rand() * 500);
  for (let t = sickFrom + sickPhase; t < durationMs; t += 500)
    reports.push({ at: T0 + t + Math.floor(rand() * 100), reporter: 'sick', counts: { transient: 40 } });
  return reports;
}

describe('quorum: failures from one reporter do not open the fleet breaker', () => {
  test('49 healthy reporters at 10 calls/s and one failing 40 calls every 0.5 s: no trip in 20 seeded trials (and every trial trips without the quorum)', () => {
    const withQuorum = parsePolicyConfig(ENTITY_DEFAULTS);
    const without = parsePolicyConfig({ ...ENTITY_DEFAULTS, quorum: 1 });
    let trippedWithout = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const reports = sickWorkerFleet(seeded(seed), 49, 60_000, 10_000);
      assert.equal(firstTrip(withQuorum, reports), null, `trial ${seed} tripped with the quorum`);
      if (firstTrip(without, reports)) trippedWithout++;
    }
    // The case is the one that opened the breaker before the quorum: the test would catch its return.
    assert.equal(trippedWithout, 20);
  });

  test('a restarted reporter does not make a quorum: two process ids of one host (one witness) failing, beside a healthy host', () => {
    const config = parsePolicyConfig(ENTITY_DEFAULTS);
    // Host a's worker fails, restarts within the window under a new process id and fails again; host b is served.
    const reports = (witnessed: boolean): Report[] => {
      const out: Report[] = [];
      for (let t = 0; t < 10_000; t += 1_000)
        out.push({
          at: T0 + t,
          reporter: 'worker-1@b-0001',
          ...(witnessed ? { witness: 'host:b' } : {}),
          counts: { success: 10 },
        });
      for (let t = 2_000; t < 5_000; t += 500)
        out.push({
          at: T0 + t + 1,
          reporter: 'worker-1@a-aaaa',
          ...(witnessed ? { witness: 'host:a' } : {}),
          counts: { transient: 40 },
        });
      for (let t = 5_000; t < 10_000; t += 500)
        out.push({
          at: T0 + t + 1,
          reporter: 'worker-1@a-bbbb',
          ...(witnessed ? { witness: 'host:a' } : {}),
          counts: { transient: 40 },
        });
      return out;
    };
    assert.equal(
      firstTrip(config, reports(true)),
      null,
      'one failing host, whatever its process ids, is one failing witness',
    );
    // Counted by process id, as before witnesses, the restart alone meets the quorum: the case the test is about.
    assert.notEqual(firstTrip(config, reports(false)), null);
    // Two failing hosts still trip.
    const twoHosts = reports(true).map((r) => (r.reporter === 'worker-1@a-bbbb' ? { ...r, witness: 'host:c' } : r));
    assert.notEqual(firstTrip(config, twoHosts), null);
  });

  test('a declined trip says why: the quorum was not met, failures from 1 reporter', () => {
    const config = parsePolicyConfig(ENTITY_DEFAULTS);
    let s = initialState(config);
    s = step(s, { type: 'report', reporter: 'good', counts: { success: 10 } }, T0, 0.5).state;
    const out = step(s, { type: 'report', reporter: 'sick', counts: { transient: 40 } }, T0 + 100, 0.5);
    assert.equal(out.transitions.length, 0);
    assert.match(out.declined ?? '', /^quorum not met: failures from 1 reporter \(2 needed\)/);
  });

  test('property: with a quorum of 2, one failing reporter never trips a fleet of several active reporters', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: 0, max: 2_000 }),
            who: fc.nat(),
            fail: fc.integer({ min: 0, max: 200 }),
            ok: fc.integer({ min: 0, max: 50 }),
          }),
          {
            minLength: 1,
            maxLength: 60,
          },
        ),
        fc.integer({ min: 1, max: 8 }),
        (healthy, events, minSamples) => {
          const config = parsePolicyConfig({ ...ENTITY_DEFAULTS, minSamples, windowMs: 10_000 });
          let s = initialState(config);
          let t = T0;
          // Every healthy reporter is active (heard from within the last second) before the sick one fails.
          for (let w = 0; w < healthy; w++)
            s = step(s, { type: 'report', reporter: `good-${w}`, counts: { success: 1 } }, t, 0.5).state;
          // One healthy reporter at least besides the sick one.
          s = step(s, { type: 'report', reporter: 'good-extra', counts: { success: 1 } }, t, 0.5).state;
          for (const e of events) {
            t += e.dt;
            // A healthy reporter stays active (guards report every second while they have traffic).
            s = step(s, { type: 'report', reporter: 'good-extra', counts: { success: 1 } }, t, 0.5).state;
            // Healthy reporters report successes; only 'sick' ever reports failures.
            const sick = e.who % 3 === 0;
            const reporter = sick ? 'sick' : `good-${e.who % healthy}`;
            const counts = sick ? { transient: e.fail, success: e.ok } : { success: Math.max(1, e.ok) };
            const out = step(s, { type: 'report', reporter, counts }, t, 0.5);
            s = out.state;
            assert.equal(
              out.transitions.some((x) => x.to === 'open'),
              false,
              'one reporter tripped the breaker',
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test('property: q reporters failing trip it, for any quorum q', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 1, max: 20 }),
        (q, extraHealthy, perReport) => {
          const config = parsePolicyConfig({ ...ENTITY_DEFAULTS, quorum: q, minSamples: 5 });
          let s = initialState(config);
          let t = T0;
          for (let w = 0; w < extraHealthy; w++)
            s = step(s, { type: 'report', reporter: `good-${w}`, counts: { success: 1 } }, t, 0.5).state;
          let opened = false;
          // q reporters failing, each its own share of the fast window's samples, within a fraction of a second.
          for (let round = 0; round < 10 && !opened; round++) {
            for (let r = 0; r < q && !opened; r++) {
              t += 10;
              const out = step(s, { type: 'report', reporter: `bad-${r}`, counts: { transient: perReport } }, t, 0.5);
              s = out.state;
              opened = out.transitions.some((x) => x.to === 'open');
            }
          }
          assert.equal(opened, true);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('quorum: the slow-call rule', () => {
  const slowConfig = () => parsePolicyConfig({ ...ENTITY_DEFAULTS, slowCallMs: 10_000 });
  const slowly = (n: number) => histogramOf(new Array<number>(n).fill(12_000));
  const quickly = (n: number) => histogramOf(new Array<number>(n).fill(200));

  test('one worker whose calls all take 12 s among healthy ones does not open the breaker; it is noted as declined', () => {
    let s = initialState(slowConfig());
    let declined = '';
    for (let i = 0; i < 10; i++) {
      const at = T0 + i * 1_000;
      s = step(s, { type: 'report', reporter: 'good', counts: { success: 2 }, latency: quickly(2) }, at, 0.5).state;
      const out = step(
        s,
        { type: 'report', reporter: 'congested', counts: { success: 10 }, latency: slowly(10) },
        at + 10,
        0.5,
      );
      assert.deepEqual(out.transitions, [], `report ${i}`);
      declined = out.declined ?? declined;
      s = out.state;
    }
    assert.equal(windowFigures(s, T0 + 9_010).slowCalls, 100);
    assert.match(
      declined,
      /^quorum not met: slow calls from 1 reporter \(2 needed\); 100\/120 calls slower than 10000 ms/,
    );
  });

  test('two slow workers open it', () => {
    let s = initialState(slowConfig());
    let trip: TransitionRecord | undefined;
    for (let i = 0; i < 5 && !trip; i++) {
      for (const w of ['w1', 'w2']) {
        const out = step(
          s,
          { type: 'report', reporter: w, counts: { success: 6 }, latency: slowly(6) },
          T0 + i * 1_000,
          0.5,
        );
        s = out.state;
        trip ??= out.transitions.find((t) => t.to === 'open');
      }
    }
    assert.equal(trip?.reason, 'slow-calls');
    assert.match(trip?.detail ?? '', /slow for 2 reporters \(quorum 2\)$/);
  });
});

describe('quorum: a real outage trips as fast as before', () => {
  test('50 reporters all failing: the quorum trips on the same report as no quorum, or at most one report later', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const rand = seeded(seed);
      const reports: Report[] = [];
      for (let w = 0; w < 50; w++) {
        const phase = Math.floor(rand() * 1_000);
        for (let t = phase; t < 10_000; t += 1_000)
          reports.push({ at: T0 + t, reporter: `w-${w}`, counts: t < 5_000 ? { success: 10 } : { transient: 10 } });
      }
      const before = firstTrip(parsePolicyConfig({ ...ENTITY_DEFAULTS, quorum: 1 }), reports);
      const after = firstTrip(parsePolicyConfig(ENTITY_DEFAULTS), reports);
      assert.ok(before && after, `trial ${seed}: both trip`);
      const sorted = reports.map((r) => r.at).sort((a, b) => a - b);
      const idx = (at: number) => sorted.lastIndexOf(at);
      assert.ok(
        idx(after.at) - idx(before.at) <= 1,
        `trial ${seed}: the quorum tripped ${idx(after.at) - idx(before.at)} reports later`,
      );
    }
  });

  test('a single reporter (the only one active) still trips alone', () => {
    const config = parsePolicyConfig(ENTITY_DEFAULTS);
    const reports: Report[] = [];
    for (let t = 0; t < 5_000; t += 500) reports.push({ at: T0 + t, reporter: 'only', counts: { transient: 10 } });
    assert.ok(firstTrip(config, reports));
  });

  test('reports without a reporter id count as one reporter: a lone tester trips', () => {
    const config = parsePolicyConfig(ENTITY_DEFAULTS);
    let s = initialState(config);
    let opened = false;
    for (let i = 0; i < 10 && !opened; i++) {
      const out = step(s, { type: 'report', counts: { transient: 10 } }, T0 + i * 100, 0.5);
      s = out.state;
      opened = out.transitions.some((x) => x.to === 'open');
    }
    assert.equal(opened, true);
  });
});

describe('quorum: the carried window keeps the reporters', () => {
  test('pack and unpack keep the quorum figures, slow reporters too', () => {
    const config = parsePolicyConfig({ ...ENTITY_DEFAULTS, quorum: 3, slowCallMs: 1_000 });
    let s = initialState(config);
    const now = T0 + 2_000;
    s = step(
      s,
      { type: 'report', reporter: 'a', counts: { success: 5 }, latency: histogramOf([3_000, 3_000, 50, 50, 50]) },
      T0,
      0.5,
    ).state;
    s = step(s, { type: 'report', reporter: 'b', counts: { transient: 5 } }, T0 + 1_000, 0.5).state;
    s = step(s, { type: 'report', reporter: 'c', counts: { transient: 1, success: 9 } }, now, 0.5).state;
    const packed = packWindow(s.window, config, now, 14_000);
    assert.deepEqual(
      quorumFigures(unpackWindow(JSON.parse(JSON.stringify(packed)) as typeof packed), now, config),
      quorumFigures(s.window, now, config),
    );
    assert.deepEqual(quorumFigures(s.window, now, config), {
      required: 3,
      failing: 1,
      fastFailing: 1,
      active: 3,
      slow: 1,
    });
  });

  test('600 busy buckets with a quorum of 16 pack within the budget and keep at least the quorum figures', () => {
    const config = parsePolicyConfig({ windowMs: 60_000, bucketMs: 100, quorum: 16 });
    let s = initialState(config);
    const rand = seeded(7);
    let t = T0;
    for (let i = 0; i < 6_000; i++) {
      t += 10;
      s = step(
        s,
        {
          type: 'report',
          reporter: `w-${Math.floor(rand() * 200)}`,
          counts: { success: 3, transient: rand() < 0.1 ? 5 : 0 },
        },
        t,
        0.5,
      ).state;
    }
    const packed = packWindow(s.window, config, t, 14_000);
    assert.ok(JSON.stringify(packed).length <= 14_000, `packed ${JSON.stringify(packed).length} characters`);
    const after = quorumFigures(unpackWindow(packed), t, config)!;
    const before = quorumFigures(s.window, t, config)!;
    // Merging older buckets can only move outcomes later, never lose a reporter.
    assert.ok(after.failing >= before.failing && after.active >= before.active);
  });

  test('reporter hashes are stable numbers', () => {
    assert.equal(reporterHash('sim-1'), reporterHash('sim-1'));
    assert.notEqual(reporterHash('sim-1'), reporterHash('sim-2'));
    assert.ok(Number.isInteger(reporterHash('x')) && reporterHash('x') >= 0);
  });
});
