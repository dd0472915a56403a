import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Roster } from '../../src/workflows/breaker-entity/roster';

test('counting the rate sharers changes nothing: the view and status queries count, and queries must be pure', () => {
  const r = new Roster([['a', 0]], 5_000);
  r.heard('b', 4_000);
  assert.equal(r.active(6_000), 1); // a is past the TTL, b is not
  assert.equal(r.active(6_000), 1);
  // The query forgot nobody: a replay, which runs no queries, holds the same state as the run.
  assert.deepEqual(r.entries(), [
    ['a', 0],
    ['b', 4_000],
  ]);
});

test('events forget the workers not heard from within the TTL, with or without a rate limit', () => {
  const r = new Roster(undefined, 5_000);
  for (let i = 0; i < 100; i++) r.heard(`worker-${i}`, i);
  r.heard('late', 20_000);
  assert.deepEqual(r.entries(), [['late', 20_000]]);
  r.prune(30_000);
  assert.equal(r.size, 0);
});
