import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  holdsRequests,
  mediansTable,
  metricsLine,
  metricsTarget,
  overheadFigures,
  type OverheadRun,
} from '../../bench/throughput/metrics-overhead';

const run = (metrics: 'off' | 'on', round: number, wallS: number, cpuS: number): OverheadRun => ({
  metrics,
  round,
  wallS,
  fetchS: wallS / 3,
  cpuS,
  ok: 4096,
});

test("bench:throughput's metrics line: medians of each side, tiles/s from the whole wall time, ratio on/off to 3 decimals", () => {
  // Off: 20, 22, 21 s -> median 21 s = 195.0 tiles/s; on: 21.5, 25, 20.5 s -> median 21.5 s = 190.5 tiles/s.
  const runs = [
    run('off', 1, 20, 30),
    run('on', 1, 21.5, 31),
    run('off', 2, 22, 29),
    run('on', 2, 25, 33.5),
    run('off', 3, 21, 30.25),
    run('on', 3, 20.5, 32),
  ];
  const f = overheadFigures(4096, runs);
  assert.equal(f.off.runs, 3);
  assert.equal(f.off.wallS, 21);
  assert.equal(f.on.wallS, 21.5);
  assert.equal(f.off.cpuS, 30);
  assert.equal(f.on.cpuS, 32);
  assert.equal(metricsLine(f), 'metrics: off=195.0 on=190.5 ratio=0.977 cpu-off-s=30.00 cpu-on-s=32.00');
  assert.equal(metricsTarget(f), 'metrics on within 2 % of off: MISSED');
  assert.deepEqual(mediansTable(f), [
    '  metrics medians (3 off, 3 on):',
    '                          off       on',
    '    wall s               21.0     21.5',
    '    tiles/s             195.0    190.5',
    '    fetch phase s        7.00     7.17',
    '    worker cpu s        30.00    32.00',
  ]);
});

test('bench:throughput metrics target: met at exactly 2 % slower, and when on is faster; an even count takes the mean of the middle two', () => {
  const at2 = overheadFigures(1000, [run('off', 1, 9.8, 1), run('on', 1, 10, 1)]);
  assert.equal(at2.ratio.toFixed(3), '0.980');
  assert.equal(metricsTarget(at2), 'metrics on within 2 % of off: met');
  const faster = overheadFigures(1000, [
    run('off', 1, 10, 1),
    run('off', 2, 12, 1),
    run('on', 1, 9, 1),
    run('on', 2, 11, 1),
  ]);
  // Off: 100 and 83.33 tiles/s -> 91.67; on: 111.1 and 90.9 -> 101.0.
  assert.equal(metricsLine(faster), 'metrics: off=91.7 on=101.0 ratio=1.102 cpu-off-s=1.00 cpu-on-s=1.00');
  assert.equal(metricsTarget(faster), 'metrics on within 2 % of off: met');
});

test("bench:throughput's scrape check: a tilebreaker_requests_total sample counts, its HELP/TYPE lines or a longer name do not", () => {
  assert.equal(
    holdsRequests('# HELP tilebreaker_requests_total x\n# TYPE tilebreaker_requests_total counter\n'),
    false,
  );
  assert.equal(holdsRequests('tilebreaker_requests_total_other{a="b"} 1\ntemporal_request 3\n'), false);
  assert.equal(
    holdsRequests(
      '# TYPE tilebreaker_requests_total counter\ntilebreaker_requests_total{endpoint="http://127.0.0.1:1",outcome="success",source="bench"} 256\n',
    ),
    true,
  );
  assert.equal(holdsRequests('tilebreaker_requests_total 3\n'), true);
});
