import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ActivityNotFoundError, type Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import {
  makeFetchBatch,
  type BatchResume,
  type FetchBatchInput,
  type TileResult,
} from '../../src/activities/fetch/fetch-batch';
import { HeartbeatLease } from '../../src/activities/fetch/heartbeat-lease';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { parseSource } from '../../src/sources/schema';
import { startFaultServer, type FaultServer } from '../helpers/fault-server';

const TIMEOUT_MS = 6_000;
let server: FaultServer;
let root: string;
const pools = new EndpointPools();

before(async () => {
  server = await startFaultServer();
  root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-lease-'));
});
after(async () => {
  await pools.close();
  await server.close();
  rmSync(root, { recursive: true, force: true });
});

/** A worker's client as an activity sees it, whose heartbeat RPC does what `heartbeat` does. */
function clientWith(heartbeat: () => Promise<void>): Client {
  const scoped = <R>(_: unknown, fn: () => Promise<R>) => fn();
  return { activity: { heartbeat }, withDeadline: scoped, withAbortSignal: scoped } as unknown as Client;
}

/**
 * 24 tiles, 4 in flight at most, through a fetch whose clock moves 1 s on as each request finishes (so a
 * heartbeat goes out every few of them); what the server saw and what was recorded as finished.
 */
async function run(
  heartbeat: () => Promise<void>,
  tiles = 24,
): Promise<{ requests: number; recorded: number; outcome: TileResult[] | Error }> {
  let clock = 0;
  let recorded = 0;
  const fetchTiles = makeFetchBatch({ pools, now: () => clock });
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: TIMEOUT_MS }, { client: clientWith(heartbeat) });
  const input: FetchBatchInput = {
    sourceName: `lease-${Math.random().toString(36).slice(2)}`,
    source: parseSource({ type: 'xyz', url: `${server.url}/ok/{z}/{x}/{y}.png`, concurrency: 4 }),
    tiles: Array.from({ length: tiles }, (_, i) => ({ z: 5, x: i, y: 1 })),
    storeRoot: root,
    breaker: false,
  };
  const before = server.requests;
  const onFinished = (indices: readonly number[]) => {
    recorded += indices.length;
    clock += 1_000;
  };
  const outcome = await env
    .run<[FetchBatchInput, BatchResume], TileResult[], typeof fetchTiles>(fetchTiles, input, { onFinished })
    .catch((err: Error) => err);
  return { requests: server.requests - before, recorded, outcome };
}

describe('an attempt whose heartbeats the server does not accept', () => {
  test('a batch whose heartbeats are accepted fetches every tile (the control: the same clock, the heartbeat path working)', async () => {
    const { requests, outcome } = await run(() => Promise.resolve());
    assert.ok(Array.isArray(outcome), `the batch finished: ${outcome instanceof Error ? outcome.message : ''}`);
    assert.ok(outcome.every((r) => r.status === 'ok'));
    assert.equal(requests, 24);
  });

  test('Temporal unreachable for longer than the heartbeat timeout: the attempt starts no new request, records those in flight and fails retryable', async () => {
    const { requests, recorded, outcome } = await run(() =>
      Promise.reject(new Error('14 UNAVAILABLE: No connection established')),
    );
    assert.ok(outcome instanceof Error, 'the attempt does not report its batch done');
    assert.match(
      outcome.message,
      /fetch batch stopped starting requests: no heartbeat accepted by the server for \d+\.\d s \(heartbeat timeout 6\.0 s\)/,
    );
    // Lost as the 7th request finished (the clock past 6 s): besides those 7, only the other 7 of its 8 loops
    // (twice the concurrency: 4 requesting, 4 storing) can have a request made, none starts one after.
    assert.ok(requests <= 7 + 7, `${requests} requests made`);
    assert.ok(requests < 24);
    assert.equal(recorded, requests, 'every request made was recorded as finished');
  });

  test('the server no longer knows the attempt (a retry has it): no further request at once', async () => {
    const { requests, outcome } = await run(() => Promise.reject(new ActivityNotFoundError('Not found')));
    assert.ok(outcome instanceof Error);
    assert.match(outcome.message, /the server no longer knows this attempt/);
    // The first heartbeat goes out before the first request; its answer arrives while at most 4 are in flight.
    assert.ok(requests <= 4, `${requests} requests made`);
  });
});

describe('HeartbeatLease', () => {
  test('held while heartbeats are accepted within the timeout, lost after a timeout without one, and lost for good', async () => {
    let clock = 1_000;
    let accept = true;
    const lease = new HeartbeatLease(
      TIMEOUT_MS,
      () => Promise.resolve(accept ? 'accepted' : 'unanswered'),
      () => clock,
    );
    const settle = () => new Promise<void>((r) => setImmediate(r));
    for (let i = 0; i < 10; i++) {
      lease.beat({});
      await settle();
      clock += 2_000;
      assert.equal(lease.lost(), null, `at ${clock} ms`);
    }
    accept = false;
    const lastAccepted = clock - 2_000;
    for (; clock - lastAccepted <= TIMEOUT_MS; clock += 1_000) {
      lease.beat({});
      await settle();
      assert.equal(lease.lost(), null, `at ${clock} ms`);
    }
    assert.match(lease.lost() ?? '', /^no heartbeat accepted by the server for 7\.0 s/);
    accept = true;
    clock += 2_000;
    lease.beat({});
    await settle();
    assert.notEqual(lease.lost(), null, 'a lost attempt stays lost');
  });

  test('a heartbeat timeout that is not a positive number of ms is refused, naming it', () => {
    assert.throws(
      () =>
        new HeartbeatLease(
          0,
          () => Promise.resolve('accepted'),
          () => 0,
        ),
      /timeoutMs must be a number of ms > 0 \(got 0\)/,
    );
  });
});
