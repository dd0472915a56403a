import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import {
  makeFetchBatch,
  probeBoundMs,
  type FetchBatchInput,
  type TileResult,
} from '../../src/activities/fetch/fetch-batch';
import { BreakerGuard, BreakerOpenedError } from '../../src/activities/guard';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { TileStore } from '../../src/activities/tile-store/tile-store';
import type { GuardDecision } from '../../src/activities/guard';
import { requestShape, shapeKey, ShapeMemory } from '../../src/activities/validate/shape-memory';
import { breakerKey } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { parseSource } from '../../src/sources/schema';
import { adminSignal, viewQuery } from '../../src/messages/breaker';
import { startEntity } from '../helpers/entity';
import { startFaultServer, type FaultServer } from '../helpers/fault-server';
import { gradientImage } from '../helpers/images';
import { TEST_ROOTS, timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

let server: FaultServer;
let root: string;
const pools = new EndpointPools();
const fetchTiles = makeFetchBatch({ pools });
const tiles = (n: number) => Array.from({ length: n }, (_, i) => ({ z: 5, x: i % 32, y: Math.floor(i / 32) }));
const source = (route: string) =>
  parseSource({
    type: 'xyz',
    url: `${server.url}/${route}/{z}/{x}/{y}.png`,
    concurrency: 4,
    timeouts: { connectMs: 1_000, headersMs: 1_000, bodyMs: 1_000, totalMs: 2_000 },
  });
const input = (route: string, n: number, extra: Partial<FetchBatchInput> = {}): FetchBatchInput => ({
  sourceName: route,
  source: source(route),
  tiles: tiles(n),
  storeRoot: root,
  retry: { attempts: 2, baseMs: 1, capMs: 5 },
  ...extra,
});

before(async () => {
  server = await startFaultServer();
  root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-store-'));
});
after(async () => {
  await pools.close();
  await server.close();
  rmSync(root, { recursive: true, force: true });
});

describe('the batch fetch activity', () => {
  test('stale means stale: a tile the server fails (transient, service exception) is drawn from its stored copy; a permanent fault is not hidden', async () => {
    const store = new TileStore(root);
    const copy = await gradientImage(256, 256);
    for (const route of ['status/503', 'se-111', 'status/400']) {
      await store.put(route.replace(/\W/g, '_'), { z: 5, x: 0, y: 0 }, copy, {
        fetchedAt: Date.now() - 3_600_000,
        contentType: 'image/png',
      });
    }
    const run = (route: string) =>
      fetchTiles({
        ...input(route, 2, { whenRefused: 'stale' }),
        sourceName: route.replace(/\W/g, '_'),
        breaker: false,
      });
    for (const route of ['status/503', 'se-111']) {
      const [withCopy, without] = await run(route);
      assert.equal(withCopy!.status, 'stale', withCopy!.reason);
      assert.match(withCopy!.reason, /; served the copy fetched /);
      assert.equal(withCopy!.path, path.join(root, route.replace(/\W/g, '_'), '5', '0', '0.png'));
      assert.equal(without!.status, 'failed', 'no copy: failed as before');
    }
    const [permanent] = await run('status/400');
    assert.deepEqual([permanent!.status, permanent!.kind], ['failed', 'permanent']);
    // Without the stale fallback nothing changes.
    const [plain] = await fetchTiles({ ...input('status/503', 1), sourceName: 'status_503', breaker: false });
    assert.equal(plain!.status, 'failed');
  });

  test('every tile is fetched, validated and stored atomically with its metadata', async () => {
    const results = await fetchTiles(input('ok', 20));
    assert.equal(results.length, 20);
    assert.ok(results.every((r) => r.status === 'ok' && r.kind === 'success' && r.attempts === 1));
    const r = results[7]!;
    assert.equal(r.path, path.join(root, 'ok', '5', '7', '0.png'));
    const stored = await new TileStore(root).get('ok', { z: 5, x: 7, y: 0 });
    assert.equal(stored?.meta.sha256, createHash('sha256').update(readFileSync(r.path)).digest('hex'));
    assert.equal(stored?.meta.width, 256);
    assert.ok(!readFileSyncSafe(path.dirname(r.path)).some((f) => f.endsWith('.tmp')), 'no temporary files left');
  });

  test('failures are retried within the batch, permanent ones never, 404s become holes: no tile is missing', async () => {
    const failed = await fetchTiles(input('status/503', 3));
    assert.deepEqual(
      failed.map((r) => [r.status, r.kind, r.attempts]),
      Array(3).fill(['failed', 'transient', 2]),
    );
    const permanent = await fetchTiles(input('se-130-layer', 2));
    assert.deepEqual(
      permanent.map((r) => [r.status, r.kind, r.attempts]),
      Array(2).fill(['failed', 'permanent', 1]),
    );
    assert.match(permanent[0]!.reason, /LayerNotDefined/);
    const holes = await fetchTiles(input('status/404', 2));
    assert.deepEqual(
      holes.map((r) => [r.status, r.kind]),
      Array(2).fill(['hole', 'neutral']),
    );
    const auth = await fetchTiles(input('status/401', 1));
    assert.equal(auth[0]!.status, 'failed');
    assert.equal(auth[0]!.configError, true);
  });

  test('credentials come from the environment at request time and never appear in a result', async () => {
    process.env.TB_TEST_KEY = 's3cret';
    try {
      const auth = { type: 'query', param: 'api_key', valueEnv: 'TB_TEST_KEY' } as const;
      const ok = await fetchTiles({
        ...input('keyed', 1),
        source: parseSource({ type: 'xyz', url: `${server.url}/keyed/{z}/{x}/{y}.png`, auth }),
      });
      assert.equal(ok[0]!.status, 'ok', ok[0]!.reason);
      const down = await fetchTiles({
        ...input('keyed-down', 1),
        source: parseSource({ type: 'xyz', url: `${server.url}/keyed-down/{z}/{x}/{y}.png`, auth }),
      });
      assert.equal(down[0]!.status, 'failed');
      assert.match(down[0]!.reason, /api_key=\*\*\*/);
      assert.ok(!JSON.stringify([ok, down]).includes('s3cret'), 'the secret is in no result');
      delete process.env.TB_TEST_KEY;
      const before = server.requests;
      const unset = await fetchTiles({
        ...input('keyed', 2),
        source: parseSource({ type: 'xyz', url: `${server.url}/keyed/{z}/{x}/{y}.png`, auth }),
      });
      assert.deepEqual(
        unset.map((r) => [r.status, r.configError, r.attempts]),
        Array(2).fill(['failed', true, 0]),
      );
      assert.match(unset[0]!.reason, /environment variable TB_TEST_KEY is not set/);
      assert.equal(server.requests, before, 'no request without the credential');
    } finally {
      delete process.env.TB_TEST_KEY;
    }
  });

  test('a conditional refresh of a stored tile gets 304 and keeps the stored copy', async () => {
    const first = await fetchTiles(input('etag', 2, { conditional: true }));
    assert.deepEqual(
      first.map((r) => [r.status, r.httpStatus]),
      [
        ['ok', 200],
        ['ok', 200],
      ],
    );
    const meta = (await new TileStore(root).get('etag', { z: 5, x: 0, y: 0 }))!.meta;
    assert.equal(meta.etag, '"v1"');
    assert.equal(meta.lastModified, 'Sun, 01 Nov 2026 00:00:00 GMT');
    const again = await fetchTiles(input('etag', 2, { conditional: true }));
    assert.deepEqual(
      again.map((r) => [r.status, r.httpStatus, r.path]),
      first.map((r) => ['ok', 304, r.path]),
    );
    assert.match(again[0]!.reason, /not modified/);
  });

  test('a retried activity resumes from its heartbeat and does not fetch finished tiles again', async () => {
    const done: TileResult = {
      z: 5,
      x: 0,
      y: 0,
      status: 'ok',
      kind: 'success',
      reason: 'earlier attempt',
      attempts: 1,
    };
    const env = new MockActivityEnvironment({ heartbeatDetails: { results: [done, null, null, null] } });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const before = server.requests;
    const results: TileResult[] = await env.run(fetchTiles, input('ok', 4));
    assert.equal(server.requests - before, 3, 'only the three unfinished tiles were requested');
    assert.equal(results[0]!.reason, 'earlier attempt');
    assert.ok(beats.length >= 1, 'progress was heartbeated');
  });

  test('a retried attempt keeps the tiles an earlier one stored but never recorded (killed between storing and its checkpoint); a first attempt, or a copy from before the batch was scheduled, is fetched', async () => {
    const store = new TileStore(root);
    const png = await gradientImage(256, 256);
    const four = [0, 1, 2, 3].map((x) => ({ z: 7, x, y: 9 }));
    const scheduledAt = Date.now() - 60_000;
    await store.put('ok', four[0]!, png, { fetchedAt: scheduledAt + 1_000, contentType: 'image/png' });
    await store.put('ok', four[1]!, png, { fetchedAt: scheduledAt + 2_000, contentType: 'image/png' });
    // Last night's copy: not this batch's.
    await store.put('ok', four[2]!, png, { fetchedAt: scheduledAt - 3_600_000, contentType: 'image/png' });
    const retry = new MockActivityEnvironment({ attempt: 2, scheduledTimestampMs: scheduledAt });
    let before = server.requests;
    const results: TileResult[] = await retry.run(fetchTiles, input('ok', 4, { tiles: four }));
    assert.equal(
      server.requests - before,
      2,
      'only the tile stored before the batch and the one never stored were requested',
    );
    assert.deepEqual(
      results.map((r) => [r.status, r.attempts]),
      [
        ['ok', 0],
        ['ok', 0],
        ['ok', 1],
        ['ok', 1],
      ],
    );
    assert.match(results[0]!.reason, /stored by an earlier attempt of this batch/);
    // A first attempt has no earlier one: it asks for every tile, stored or not.
    before = server.requests;
    await new MockActivityEnvironment({ attempt: 1, scheduledTimestampMs: scheduledAt }).run(
      fetchTiles,
      input('ok', 4, { tiles: four }),
    );
    assert.equal(server.requests - before, 4);
  });

  test("a tile a mirror serves after the primary's breaker refused its retry: the record counts the primary's request and the mirror's, and keeps the breaker's state", async () => {
    const primary = source('status/503');
    const mirror = parseSource({
      type: 'xyz',
      url: `${server.url}/ok/{z}/{x}/{y}.png`,
      breakerPartition: 'mirror',
      timeouts: { connectMs: 1_000, headersMs: 1_000, bodyMs: 1_000, totalMs: 2_000 },
    });
    let primaryAsked = 0;
    const guard = {
      acquire: (key: string): Promise<GuardDecision> =>
        Promise.resolve(
          key === breakerKey(server.url) && primaryAsked++ > 0
            ? { kind: 'refused', key, state: 'open', retryAfterMs: null, reason: 'breaker open' }
            : { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false },
        ),
      release: () => undefined,
      abandon: () => undefined,
    };
    const before = server.requests;
    const [r] = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory() })({
      ...input('status/503', 1),
      source: primary,
      sourceName: 'mirrored',
      mirrors: [{ name: 'copy', source: mirror }],
    });
    assert.equal(server.requests - before, 2, 'one request to the primary, one to the mirror');
    assert.equal(r!.status, 'ok');
    assert.equal(r!.tier, 'mirror:copy');
    assert.equal(r!.attempts, 2);
    assert.equal(r!.breakerState, 'open');
  });

  test("retries' backoff sleeps leave no abort listener on the activity's signal (more than 10 printed MaxListenersExceededWarning)", async () => {
    const env = new MockActivityEnvironment();
    const signal = env.context.cancellationSignal;
    const before = getEventListeners(signal, 'abort').length;
    // 12 tiles x 3 attempts against a 503: 24 backoff sleeps on one signal.
    const results: TileResult[] = await env.run(
      fetchTiles,
      input('status/503', 12, { retry: { attempts: 3, baseMs: 1, capMs: 2 } }),
    );
    assert.ok(results.every((r) => r.status === 'failed' && r.attempts === 3));
    assert.equal(getEventListeners(signal, 'abort').length - before, 0, 'abort listeners left on the signal');
  });
});

function readFileSyncSafe(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe('with the fleet-wide breaker', () => {
  let env: TestWorkflowEnvironment;
  let worker: Worker;
  let running: Promise<void>;
  const taskQueue = uniqueTaskQueue('fetch');
  before(async () => {
    env = await timeSkippingEnv();
    worker = await createWorker({
      connection: env.nativeConnection,
      client: env.client,
      namespace: 'default',
      taskQueue,
      roots: TEST_ROOTS,
    });
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
  });

  test('an open breaker refuses without touching the network: stale copy, hole or deferral as the pipeline chose', async () => {
    const guard = new BreakerGuard({ client: env.client, taskQueue, reporter: 'fetch-test' });
    const guarded = makeFetchBatch({ pools, guard });
    const key = breakerKey(server.url);
    const h = await startEntity(env.client, taskQueue, { key, options: { searchAttributes: false } });
    await h.signal(adminSignal, { action: 'force-open', reason: 'maintenance' });
    assert.equal((await h.query(viewQuery)).state, 'forced-open'); // processed before any fetch
    // A last good copy of one tile exists.
    await new TileStore(root).put('guarded', { z: 5, x: 0, y: 0 }, await gradientImage(256, 256), {
      fetchedAt: Date.UTC(2026, 10, 1),
      contentType: 'image/png',
    });
    const before = server.requests;
    const stale = await guarded(input('ok', 2, { whenRefused: 'stale', sourceName: 'guarded' }));
    assert.deepEqual(
      stale.map((r) => r.status),
      ['stale', 'deferred'],
    );
    assert.match(stale[0]!.reason, /served the copy fetched 2026-11-01/);
    assert.equal(stale[0]!.breakerState, 'forced-open');
    const holes = await guarded(input('ok', 2, { whenRefused: 'hole' }));
    assert.deepEqual(
      holes.map((r) => r.status),
      ['hole', 'hole'],
    );
    const deferred = await guarded(input('ok', 1, { whenRefused: 'defer' }));
    assert.equal(deferred[0]!.status, 'deferred');
    assert.equal(server.requests, before, 'no request reached the server');
    await guard.close();
  });

  test('a hang: the stalled calls the opening breaker abandons are recorded as abandoned after their time in flight, with their kind, not as plain refusals', async () => {
    const srv = await stallingServer();
    const guard = new BreakerGuard({
      client: env.client,
      taskQueue,
      reporter: 'fetch-hang',
      entityOptions: { searchAttributes: false },
      stall: { floorMs: 500, initialMs: 500 },
    });
    const guarded = makeFetchBatch({ pools, guard, shapes: new ShapeMemory() });
    const source = parseSource({
      type: 'xyz',
      url: `${srv.url}/{z}/{x}/{y}.png`,
      concurrency: 8,
      timeouts: { connectMs: 1_000, headersMs: 60_000, bodyMs: 60_000, totalMs: 60_000 },
    });
    const batch = (n: number) =>
      guarded({
        sourceName: 'hang',
        source,
        tiles: tiles(n),
        storeRoot: root,
        retry: { attempts: 3, baseMs: 1, capMs: 5 },
        whenRefused: 'defer',
      });
    try {
      // Healthy first: the entity has successes in its window.
      assert.ok((await batch(40)).every((r) => r.status === 'ok'));
      await guard.flush();
      srv.state.mode = 'hang';
      const hung = await batch(8);
      for (const r of hung) {
        assert.deepEqual(
          [r.status, r.attempts, r.kind, r.httpStatus, r.breakerState],
          ['deferred', 1, 'transient', null, 'open'],
          JSON.stringify(r),
        );
        assert.equal(typeof r.abandonedAfterMs, 'number', JSON.stringify(r));
        assert.match(r.reason, /abandoned after /);
      }
    } finally {
      await guard.close();
      await srv.close();
    }
  });
});

describe('a call waiting for a connection', () => {
  test('is decided when the connection is free: a force-open while it waited sends nothing more', async () => {
    // One connection (concurrency 1) shared by two batches of the process: the server holds the first request,
    // so the other batch's calls wait for the connection.
    const png = await gradientImage(256, 256);
    const held: (() => void)[] = [];
    let received = 0;
    let forcedOpen = false;
    const srv = createServer((_req, res) => {
      received++;
      const answer = () => res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (forcedOpen) answer();
      else held.push(answer);
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/{z}/{x}/{y}.png`;
    const asked: string[] = [];
    const guard = {
      acquire: (key: string): Promise<GuardDecision> => {
        asked.push(forcedOpen ? 'refused' : 'proceed');
        return Promise.resolve(
          forcedOpen
            ? { kind: 'refused', key, state: 'forced-open', retryAfterMs: null, reason: 'breaker forced-open' }
            : { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false },
        );
      },
      release: () => undefined,
      abandon: () => undefined,
    };
    const own = new EndpointPools();
    const fetch = makeFetchBatch({ pools: own, guard, shapes: new ShapeMemory() });
    const batch = (name: string, first: number) =>
      fetch({
        sourceName: name,
        source: parseSource({ type: 'xyz', url, concurrency: 1 }),
        tiles: tiles(first + 2).slice(first),
        storeRoot: root,
        retry: { attempts: 1, baseMs: 1, capMs: 5 },
        whenRefused: 'defer',
      });
    try {
      const batches = [batch('queued-a', 0), batch('queued-b', 2)];
      for (let i = 0; i < 500 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(held.length, 1, 'the first call reached the server');
      await new Promise((r) => setTimeout(r, 100)); // the other batch's first call is queued by now
      // The operator forces the breaker open while calls wait for the connection.
      forcedOpen = true;
      held.shift()!();
      const results = (await Promise.all(batches)).flat();
      assert.deepEqual(results.map((r) => r.status).sort(), ['deferred', 'deferred', 'deferred', 'ok']);
      assert.equal(received, 1, `no request went out after the force-open (decisions: ${asked.join(', ')})`);
    } finally {
      await own.close();
      srv.close();
    }
  });
});

describe('configuration errors and systemic faults (a request-blaming ServiceException)', () => {
  // A guard that lets every call through and records what each was counted as.
  const recording = () => {
    const counted: string[] = [];
    const guard = {
      acquire: (key: string): Promise<GuardDecision> =>
        Promise.resolve({ kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false }),
      release: (_d: GuardDecision, o: { kind: string }) => void counted.push(o.kind),
      abandon: () => undefined,
    };
    return { guard, counted };
  };

  test('a wrong layer: 40 tiles at concurrency 4 cost at most 3 requests, every tile failed as a configuration error, none counted by the breaker', async () => {
    const { guard, counted } = recording();
    const fetch = makeFetchBatch({ pools, guard, shapes: new ShapeMemory() });
    const before = server.requests;
    const results = await fetch(input('se-130-layer', 40));
    const requests = server.requests - before;
    assert.ok(requests <= 3, `requests: ${requests}`);
    assert.equal(results.length, 40);
    assert.ok(results.every((r) => r.status === 'failed' && r.configError === true && r.kind === 'permanent'));
    assert.ok(
      results.every((r) => /^configuration error: LayerNotDefined for source "se-130-layer"/.test(r.reason)),
      results[0]!.reason,
    );
    assert.equal(results.filter((r) => r.attempts > 0).length, requests);
    assert.deepEqual(counted, Array(requests).fill('neutral'), "released as not the endpoint's health");
  });

  test('a shape never served is requested one at a time; once served, at full concurrency', async () => {
    const events: string[] = [];
    let inFlight = 0;
    let most = 0;
    const { guard } = recording();
    const watched = {
      ...guard,
      acquire: async (key: string) => {
        events.push('acquire');
        most = Math.max(most, ++inFlight);
        return guard.acquire(key);
      },
      release: (d: GuardDecision, o: { kind: string }) => {
        events.push('release');
        inFlight--;
        guard.release(d, o);
      },
    };
    const results = await makeFetchBatch({ pools, guard: watched, shapes: new ShapeMemory() })({
      ...input('ok', 24),
      sourceName: 'solo',
    });
    assert.ok(results.every((r) => r.status === 'ok'));
    // The first request ends before any other starts; once it succeeded the others run 4 at a time.
    assert.deepEqual(events.slice(0, 2), ['acquire', 'release']);
    assert.ok(most > 1, `concurrency once served: ${most}`);
  });

  test('systemic: the same fault for a shape that succeeded minutes ago is a service exception, retried, counted and curable', async () => {
    const { guard, counted } = recording();
    const shapes = new ShapeMemory();
    const t = Date.UTC(2001, 1, 3, 12);
    shapes.succeeded(requestShape(source('se-130-layer'), ''), t - 120_000);
    const fetch = makeFetchBatch({ pools, guard, shapes, now: () => t });
    const results = await fetch(input('se-130-layer', 4));
    assert.deepEqual(
      results.map((r) => [r.status, r.kind, r.attempts, r.configError]),
      Array(4).fill(['failed', 'service-exception', 2, undefined]),
    );
    assert.match(results[0]!.reason, /^systemic: LayerNotDefined for a request that succeeded 120 s ago/);
    assert.deepEqual(counted, Array(8).fill('service-exception'));
    // Eleven minutes after the last success it is the configuration's again.
    const late = await makeFetchBatch({ pools, guard, shapes, now: () => t + 540_001 })(input('se-130-layer', 1));
    assert.equal(late[0]!.configError, true);
  });

  test('a fresh process (a restarted worker, the next night): systemic when the tile store records the shape served yesterday; configuration with no record', async () => {
    const t = Date.UTC(2001, 1, 3, 12);
    const route = 'se-130-layer';
    const shape = requestShape(source(route), '');
    const stores = mkdtempSync(path.join(tmpdir(), 'tilebreaker-served-'));
    try {
      // Recorded by another worker yesterday, in this store; a second store records nothing.
      const served = path.join(stores, 'served');
      await new TileStore(served).markServed(route, shapeKey(shape), t - 24 * 3_600_000);
      const { guard, counted } = recording();
      const results = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory(), now: () => t })(
        input(route, 4, { storeRoot: served }),
      );
      assert.deepEqual(
        results.map((r) => [r.status, r.kind, r.attempts, r.configError]),
        Array(4).fill(['failed', 'service-exception', 2, undefined]),
      );
      assert.match(
        results[0]!.reason,
        /^systemic: LayerNotDefined for a request last served 24 h ago \(recorded in the tile store\)/,
      );
      assert.deepEqual(counted, Array(8).fill('service-exception'), 'counted for the breaker');
      // Curable: the stale fallback draws a stored copy of a systemic failure.
      await new TileStore(served).put(route, { z: 5, x: 0, y: 0 }, await gradientImage(256, 256), {
        fetchedAt: t - 24 * 3_600_000,
        contentType: 'image/png',
      });
      const [stale] = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory(), now: () => t })(
        input(route, 1, { storeRoot: served, whenRefused: 'stale' }),
      );
      assert.equal(stale!.status, 'stale');

      const none = recording();
      const before = server.requests;
      const unknown = await makeFetchBatch({ pools, guard: none.guard, shapes: new ShapeMemory(), now: () => t })(
        input(route, 8, { storeRoot: path.join(stores, 'empty') }),
      );
      assert.ok(unknown.every((r) => r.status === 'failed' && r.configError === true && r.kind === 'permanent'));
      assert.match(
        unknown[0]!.reason,
        /^configuration error: LayerNotDefined for source "se-130-layer" \(its request has not succeeded in this worker; the tile store has no record of it served\)/,
      );
      assert.ok(server.requests - before <= 3, 'a few requests, one at a time');
      assert.ok(none.counted.every((k) => k === 'neutral'));
    } finally {
      rmSync(stores, { recursive: true, force: true });
    }
  });

  test('a success records the shape served in the tile store: one record per shape, named by its hash, at the batch clock', async () => {
    const t = Date.UTC(2001, 1, 3, 12);
    const stores = mkdtempSync(path.join(tmpdir(), 'tilebreaker-served-'));
    try {
      const results = await makeFetchBatch({ pools, shapes: new ShapeMemory(), now: () => t })(
        input('ok', 12, { storeRoot: stores }),
      );
      assert.ok(results.every((r) => r.status === 'ok'));
      const records = readdirSync(path.join(stores, 'ok', '.served'));
      assert.deepEqual(records, [shapeKey(requestShape(source('ok'), ''))]);
      assert.equal(await new TileStore(stores).servedAt('ok', records[0]!), t);
    } finally {
      rmSync(stores, { recursive: true, force: true });
    }
  });
  test("a night that writes a dated output (a new tile store) judges a vanished layer by the source's record under the output root, not by its new store", async () => {
    const t = Date.UTC(2001, 1, 3, 12);
    const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-ledger-'));
    const roots = { sources: [root], outputs: [root] };
    try {
      // A success records the shape in its tile store and under the root, for every output beneath it.
      const first = await makeFetchBatch({ pools, shapes: new ShapeMemory(), now: () => t - 24 * 3_600_000, roots })(
        input('ok', 4, { storeRoot: path.join(root, '2001-02-02', 'night.tiles') }),
      );
      assert.ok(first.every((r) => r.status === 'ok'));
      const key = shapeKey(requestShape(source('ok'), ''));
      assert.equal(await new TileStore(path.join(root, '.tilebreaker-served')).servedAt('ok', key), t - 24 * 3_600_000);
      // Tonight's output is new: its store has no record, the root's does (the layer served last night).
      const route = 'se-130-layer';
      await new TileStore(path.join(root, '.tilebreaker-served')).markServed(
        route,
        shapeKey(requestShape(source(route), '')),
        t - 24 * 3_600_000,
      );
      const tonight = { storeRoot: path.join(root, '2001-02-03', 'night.tiles') };
      const { guard, counted } = recording();
      const results = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory(), now: () => t, roots })(
        input(route, 4, tonight),
      );
      assert.deepEqual(
        results.map((r) => [r.status, r.kind, r.configError]),
        Array(4).fill(['failed', 'service-exception', undefined]),
      );
      assert.match(
        results[0]!.reason,
        /^systemic: LayerNotDefined for a request last served 24 h ago \(recorded in the records under the output root\)/,
      );
      assert.deepEqual(counted, Array(8).fill('service-exception'));
      // Without the worker's roots (as before), the new store alone has no record: configuration.
      const alone = await makeFetchBatch({ pools, guard: recording().guard, shapes: new ShapeMemory(), now: () => t })(
        input(route, 1, { storeRoot: path.join(root, '2001-02-04', 'night.tiles') }),
      );
      assert.equal(alone[0]!.configError, true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
  test('a symlink planted where the served records under the root go leads nowhere: the batch is fetched, nothing is written outside the roots', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-ledger-'));
    const outside = mkdtempSync(path.join(tmpdir(), 'tilebreaker-outside-'));
    try {
      symlinkSync(outside, path.join(root, '.tilebreaker-served'));
      const results = await makeFetchBatch({
        pools,
        shapes: new ShapeMemory(),
        roots: { sources: [root], outputs: [root] },
      })(input('ok', 4, { storeRoot: path.join(root, 'night.tiles') }));
      assert.ok(results.every((r) => r.status === 'ok'));
      assert.deepEqual(readdirSync(outside), []);
    } finally {
      rmSync(root, { recursive: true, force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });
});

describe('the probe and its lease', () => {
  test("a probe slower than its token's lease is stopped before the lease ends and counted as the probe's failure", async () => {
    const released: { kind: string; token?: number }[] = [];
    const t0 = Date.now();
    const probe: GuardDecision = {
      kind: 'probe',
      key: 'k',
      token: { generation: 7, requestId: 'r', holder: 'me', grantedAt: t0, leaseUntil: t0 + 1_500 },
    };
    const guard = {
      acquire: (key: string): Promise<GuardDecision> =>
        Promise.resolve(
          released.length
            ? { kind: 'refused', key, state: 'open', retryAfterMs: 1_000, reason: 'breaker open' }
            : probe,
        ),
      release: (d: GuardDecision, o: { kind: string }) =>
        void released.push({ kind: o.kind, ...(d.kind === 'probe' ? { token: d.token.generation } : {}) }),
      abandon: () => undefined,
    };
    // The server answers in 3 s, well inside the source's own 20 s deadline but past the 1.5 s lease.
    const slow = parseSource({
      type: 'xyz',
      url: `${server.url}/slow-headers/{z}/{x}/{y}.png`,
      concurrency: 1,
      timeouts: { connectMs: 1_000, headersMs: 10_000, bodyMs: 10_000, totalMs: 20_000 },
    });
    const [r] = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory() })({
      ...input('slow-headers', 1),
      source: slow,
      retry: { attempts: 1 },
    });
    assert.deepEqual(released, [{ kind: 'transient', token: 7 }]);
    assert.equal(r!.status, 'failed');
    assert.match(r!.reason, /^probe stopped before its lease ended \(\d+ ms\)/);
    assert.ok(r!.latencyMs! < 1_500, `the probe ran ${r!.latencyMs} ms, past its 1.5 s lease`);
  });

  test('a probe the server dropped unanswered, or a call dropped after a wait, goes once more at once: a server back from a hang answers it, and the record counts both requests', async () => {
    const png = await gradientImage(256, 256);
    // Each request's fate, in order: held 1.2 s then dropped (the hang ending), answered, or dropped at once.
    const script: Array<'hold-drop' | 'ok' | 'drop'> = [];
    let received = 0;
    const srv = createServer((_req, res) => {
      const what = script[received++] ?? 'ok';
      if (what === 'ok') res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      else if (what === 'drop') res.socket?.destroy();
      else setTimeout(() => res.socket?.destroy(), 1_200);
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    const run = async (fates: typeof script, as: 'probe' | 'proceed' = 'probe') => {
      script.splice(0, script.length, ...fates);
      received = 0;
      const released: string[] = [];
      const t0 = Date.now();
      const first: GuardDecision =
        as === 'probe'
          ? {
              kind: 'probe',
              key: 'k',
              token: { generation: 3, requestId: 'r', holder: 'me', grantedAt: t0, leaseUntil: t0 + 30_000 },
            }
          : { kind: 'proceed', key: 'k', state: 'closed', allowance: 1, failOpen: false };
      const guard = {
        acquire: (key: string): Promise<GuardDecision> =>
          Promise.resolve(
            released.length
              ? { kind: 'refused', key, state: 'open', retryAfterMs: 1_000, reason: 'breaker open' }
              : first,
          ),
        release: (_d: GuardDecision, o: { kind: string }) => void released.push(o.kind),
        abandon: () => undefined,
      };
      const src = parseSource({
        type: 'xyz',
        url: `${url}/{z}/{x}/{y}.png`,
        concurrency: 1,
        timeouts: { connectMs: 1_000, headersMs: 5_000, bodyMs: 5_000, totalMs: 10_000 },
      });
      const [r] = await makeFetchBatch({ pools, guard, shapes: new ShapeMemory() })({
        ...input('dropped-probe', 1),
        sourceName: `dropped-${script.join('-')}`,
        source: src,
        retry: { attempts: 1 },
      });
      // Every request counted in the record, the one sent again too.
      return { released, status: r!.status, requests: received, attempts: r!.attempts };
    };
    try {
      assert.deepEqual(
        await run(['hold-drop', 'ok']),
        { released: ['success'], status: 'ok', requests: 2, attempts: 2 },
        'overtaken by recovery: confirmed',
      );
      assert.deepEqual(
        await run(['hold-drop', 'hold-drop']),
        { released: ['transient'], status: 'failed', requests: 2, attempts: 2 },
        'still hanging: one confirmation only',
      );
      assert.deepEqual(
        await run(['drop', 'ok']),
        { released: ['success'], status: 'ok', requests: 2, attempts: 2 },
        'dropped at once (the newest held connection): confirmed too',
      );
      assert.deepEqual(
        await run(['drop', 'drop', 'ok']),
        { released: ['transient'], status: 'failed', requests: 2, attempts: 2 },
        'dropped again: the failed probe, no third request',
      );
      // An ordinary call dropped after a wait (the hang's held connections let go) goes once more too, so a
      // short hang does not end in a burst of failures against a server that answers again.
      assert.deepEqual(
        await run(['hold-drop', 'ok'], 'proceed'),
        { released: ['success'], status: 'ok', requests: 2, attempts: 2 },
        'a held call overtaken by recovery',
      );
      assert.deepEqual(
        await run(['hold-drop', 'hold-drop'], 'proceed'),
        { released: ['transient'], status: 'failed', requests: 2, attempts: 2 },
        'still hanging: one resend',
      );
      // One reset at once is a failing server (a crashed backend behind a proxy), not a recovery: no request more.
      assert.deepEqual(
        await run(['drop', 'ok'], 'proceed'),
        { released: ['transient'], status: 'failed', requests: 1, attempts: 1 },
        'reset at once: counted, not resent',
      );
    } finally {
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
    }
  });

  test('the bound: the lease, less the time the grant took to arrive and a margin', () => {
    assert.equal(probeBoundMs({ grantedAt: 0, leaseUntil: 30_000 }, 200), 28_800);
    assert.equal(probeBoundMs({ grantedAt: 0, leaseUntil: 1_000 }, 50), 250);
  });
});

describe('concurrency is per worker process and source', () => {
  test("parallel batches share the source's connections: a request is decided (and its clocks start) only when a connection is free", async () => {
    // A server that answers in 50 ms and counts the requests it holds at once.
    const png = await gradientImage(256, 256);
    let holding = 0;
    let mostHeld = 0;
    const counting = createServer((_req, res) => {
      mostHeld = Math.max(mostHeld, ++holding);
      setTimeout(() => {
        holding--;
        res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      }, 50);
    });
    await new Promise<void>((r) => counting.listen(0, '127.0.0.1', r));
    const { port } = counting.address() as AddressInfo;
    // What the server was holding whenever a request was decided: with both connections busy, a request
    // decided then would wait in the pool, its queue time counted as the endpoint's latency and against totalMs.
    const heldAtDecision: number[] = [];
    const guard = {
      acquire: (key: string): Promise<GuardDecision> => {
        heldAtDecision.push(holding);
        return Promise.resolve({ kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false });
      },
      release: () => undefined,
      abandon: () => undefined,
    };
    const pools = new EndpointPools();
    try {
      const fetch = makeFetchBatch({ pools, guard, shapes: new ShapeMemory() });
      const two = {
        ...input('counted', 6),
        source: parseSource({ type: 'xyz', url: `http://127.0.0.1:${port}/{z}/{x}/{y}.png`, concurrency: 2 }),
      };
      // Four batches at once, as a block's parallel batches run: 4 x 2 workers, 2 connections.
      const results = await Promise.all(
        [0, 1, 2, 3].map((b) => fetch({ ...two, tiles: tiles(24).slice(b * 6, b * 6 + 6) })),
      );
      assert.ok(results.flat().every((r) => r.status === 'ok'));
      assert.ok(mostHeld <= 2, `the server held ${mostHeld} requests at once`);
      assert.equal(heldAtDecision.length, 24);
      // Before, every batch's workers decided at once: requests were decided while both connections were busy.
      assert.ok(
        heldAtDecision.every((n) => n < 2),
        `requests decided while the server held 2: ${heldAtDecision.join(',')}`,
      );
    } finally {
      await pools.close();
      counting.close();
    }
  });
});

/** A tile server on 127.0.0.1 that hangs (holds every request unanswered) or answers 503, as `mode` says. */
async function stallingServer() {
  const png = await gradientImage(256, 256);
  const held = new Set<import('node:http').ServerResponse>();
  const state = { mode: 'ok' as 'ok' | 'hang' | '503', received: 0 };
  const srv = createServer((_req, res) => {
    state.received++;
    if (state.mode === 'hang') {
      held.add(res);
      res.on('close', () => held.delete(res));
    } else if (state.mode === '503') res.writeHead(503, { 'content-type': 'text/plain' }).end('down');
    else res.writeHead(200, { 'content-type': 'image/png' }).end(png);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    state,
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    async close() {
      for (const res of held) res.destroy();
      srv.closeAllConnections();
      await new Promise<void>((r) => srv.close(() => r()));
    },
  };
}

describe("a tile's record says what happened to it when the breaker stops it", () => {
  test('timed out (or 503), then refused by the breaker that opened meanwhile: the record keeps the last attempt (kind, attempts, HTTP status) and the refusal', async () => {
    const srv = await stallingServer();
    const own = new EndpointPools();
    // The breaker lets the first attempt through and refuses the retry: it opened while the attempt failed.
    let decided = 0;
    const guard = {
      acquire: (key: string): Promise<GuardDecision> =>
        Promise.resolve(
          decided++ === 0
            ? { kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false }
            : { kind: 'refused', key, state: 'open', retryAfterMs: 30_000, reason: 'breaker open (failure-ratio)' },
        ),
      release: () => undefined,
      abandon: () => undefined,
    };
    // A 4 x 4-metatiled WMS, as the report's MapServer: one GetMap for the 4 tiles.
    const wms = parseSource({
      type: 'wms',
      url: `${srv.url}/mapserv`,
      layers: ['roads'],
      metatile: { size: [4, 4] },
      concurrency: 1,
      timeouts: { connectMs: 1_000, headersMs: 10_000, bodyMs: 10_000, totalMs: 300 },
    });
    const fetch = makeFetchBatch({ pools: own, guard, shapes: new ShapeMemory() });
    const run = () =>
      fetch({
        sourceName: 'stalling',
        source: wms,
        tiles: tiles(2).concat(tiles(34).slice(32)),
        storeRoot: root,
        retry: { attempts: 3, baseMs: 1, capMs: 5 },
        whenRefused: 'defer',
      });
    try {
      srv.state.mode = 'hang';
      const timedOut = await run();
      assert.equal(srv.state.received, 1, 'one GetMap for the metatile; the retry was refused');
      for (const r of timedOut) {
        assert.equal(r.status, 'deferred');
        assert.equal(r.kind, 'transient', `a timeout is the last attempt's outcome: ${JSON.stringify(r)}`);
        assert.equal(r.attempts, 1);
        assert.equal(r.httpStatus, null, 'no response: no HTTP status');
        assert.equal(r.breakerState, 'open', 'and then the breaker refused it');
        assert.equal(r.retryAfterMs, 30_000);
        assert.equal(r.abandonedAfterMs, undefined, 'refused before the next request, not abandoned in flight');
        assert.match(r.reason, /breaker open \(failure-ratio\)/);
        assert.match(r.reason, /no response: /);
      }
      decided = 0;
      srv.state.mode = '503';
      const down = await run();
      for (const r of down) {
        assert.deepEqual(
          [r.status, r.kind, r.attempts, r.httpStatus, r.breakerState],
          ['deferred', 'transient', 1, 503, 'open'],
          JSON.stringify(r),
        );
        assert.match(r.reason, /HTTP 503/);
      }
      // Never attempted: refused at the first decision, as before (no kind, no status, no attempts).
      decided = 1;
      const refused = await run();
      for (const r of refused) {
        assert.deepEqual(
          [r.status, r.kind, r.attempts, r.httpStatus, r.breakerState],
          ['deferred', undefined, 0, undefined, 'open'],
          JSON.stringify(r),
        );
        assert.equal(r.reason, 'breaker open (failure-ratio)');
      }
    } finally {
      await own.close();
      await srv.close();
    }
  });

  test('a call in flight that the breaker abandoned when it opened says so: in flight N ms, abandoned, not a plain refusal', async () => {
    const srv = await stallingServer();
    const own = new EndpointPools();
    const trip = new AbortController();
    const guard = {
      acquire: (key: string): Promise<GuardDecision> =>
        Promise.resolve({ kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false, signal: trip.signal }),
      release: () => undefined,
      abandon: () => undefined,
    };
    const fetch = makeFetchBatch({ pools: own, guard, shapes: new ShapeMemory() });
    try {
      srv.state.mode = 'hang';
      const batch = fetch({
        sourceName: 'abandoned',
        source: parseSource({ type: 'xyz', url: `${srv.url}/{z}/{x}/{y}.png`, concurrency: 1 }),
        tiles: tiles(1),
        storeRoot: root,
        retry: { attempts: 3, baseMs: 1, capMs: 5 },
        whenRefused: 'hole',
      });
      for (let i = 0; i < 500 && srv.state.received === 0; i++) await new Promise((r) => setTimeout(r, 10));
      // The guard's stall rule saw the breaker open: it aborts the stalled call.
      trip.abort(new BreakerOpenedError('breaker open: the call stalled and was abandoned'));
      const [r] = await batch;
      assert.equal(r!.status, 'hole');
      assert.equal(r!.attempts, 1);
      assert.equal(r!.breakerState, 'open');
      assert.equal(r!.kind, 'transient', 'counted by the breaker as a stalled call');
      assert.equal(r!.httpStatus, null);
      assert.equal(typeof r!.abandonedAfterMs, 'number', `how long it was in flight: ${JSON.stringify(r)}`);
      assert.match(r!.reason, /abandoned after /);
    } finally {
      await own.close();
      await srv.close();
    }
  });
});
