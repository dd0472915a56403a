import assert from 'node:assert/strict';
import { test } from 'node:test';
import { duplicatesByFault, NEAR_MS } from '../../scripts/fleet/duplicates';

test("the soak's duplicates by fault: each tile served twice counts against the fault about its first serve, the latest where two overlap, or none", () => {
  const serves = new Map<string, number[]>([
    ['/12/1/1.png', [10_000]], // once: not a duplicate
    ['/12/1/2.png', [10_000 - NEAR_MS + 1, 40_000]], // just before the kill
    ['/12/1/3.png', [21_000, 50_000]], // during the Temporal outage, which began after the kill
    ['/12/1/4.png', [26_000 + NEAR_MS, 60_000]], // just after the Temporal outage ended
    ['/12/1/5.png', [90_000, 91_000]], // no fault about
  ]);
  const faults = [
    { kind: 'kill' as const, startedAt: 10_000, endedAt: 20_500 },
    { kind: 'temporal' as const, startedAt: 20_000, endedAt: 26_000 },
    { kind: 's3' as const, startedAt: 70_000, endedAt: 73_000 },
  ];
  assert.deepEqual(duplicatesByFault(serves, faults), { kill: 1, temporal: 2, s3: 0, tiles: 0, none: 1 });
});
