/**
 * `guard.run` and `guard.runChain` on a real entity and real HTTP: a call that is not a tile (a geocoder on
 * loopback) under the fleet's breaker, its outcome always reported and its decision always released.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import {
  BreakerGuard,
  BreakerRefusedError,
  ChainExhaustedError,
  ContractBreachError,
  type Provider,
} from '../../src/activities/guard';
import { breakerWorkflowId, namedBreakerKey } from '../../src/breaker';
import { createWorker } from '../../src/client/worker';
import { statusQuery } from '../../src/messages/breaker';
import { timeSkippingEnv, uniqueTaskQueue } from '../helpers/temporal-env';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('guard-run');
let n = 0;
const name = (what: string) => namedBreakerKey(`geocoder:${what}-${process.pid}-${++n}`);
const guards: BreakerGuard[] = [];
const guard = (reporter: string, extra: Partial<ConstructorParameters<typeof BreakerGuard>[0]> = {}) => {
  const g = new BreakerGuard({
    client: env.client,
    taskQueue,
    reporter,
    entityOptions: { searchAttributes: false },
    logger: { warn: () => undefined },
    ...extra,
  });
  guards.push(g);
  return g;
};

/** A geocoder on loopback: answers `{ lon, lat, crs }` for /?q=..., or fails as told; counts its requests. */
interface Geocoder {
  url: string;
  mode: 'ok' | 'down' | 'hang' | 'web-mercator';
  requests: number;
  server: Server;
}
const geocoders: Geocoder[] = [];
async function geocoder(): Promise<Geocoder> {
  const g: Geocoder = { url: '', mode: 'ok', requests: 0, server: createServer() };
  g.server.on('request', (req, res) => {
    g.requests++;
    if (g.mode === 'down') return void res.writeHead(503).end('down');
    if (g.mode === 'hang') return; // never answers (the client aborts)
    res.writeHead(200, { 'content-type': 'application/json' });
    // Bern: in EPSG:4326, or (a wrongly configured mirror) in EPSG:3857 metres.
    res.end(
      JSON.stringify(
        g.mode === 'ok'
          ? { lon: 7.4474, lat: 46.948, crs: 'EPSG:4326' }
          : { lon: 829_040, lat: 5_933_537, crs: 'EPSG:3857' },
      ),
    );
  });
  await new Promise<void>((r) => g.server.listen(0, '127.0.0.1', r));
  g.url = `http://127.0.0.1:${(g.server.address() as AddressInfo).port}/`;
  geocoders.push(g);
  return g;
}

interface Place {
  lon: number;
  lat: number;
  crs: string;
}
/** One geocoding request, as an activity would make it: the run's signal passed on, a non-2xx thrown with its status. */
const lookup =
  (g: Geocoder) =>
  async ({ signal }: { signal: AbortSignal }): Promise<Place> => {
    const res = await fetch(`${g.url}?q=Bern`, { signal });
    if (!res.ok) throw Object.assign(new Error(`geocoder answered HTTP ${res.status}`), { status: res.status });
    return (await res.json()) as Place;
  };
/** Switzerland, in EPSG:4326. */
const inSwitzerland = (p: Place) =>
  p.crs !== 'EPSG:4326'
    ? `crs ${p.crs}, not EPSG:4326`
    : p.lon < 5.9 || p.lon > 10.5 || p.lat < 45.8 || p.lat > 47.9
      ? `(${p.lon}, ${p.lat}) outside 5.9,45.8,10.5,47.9`
      : null;

const status = (key: string) => env.client.workflow.getHandle(breakerWorkflowId(key)).query(statusQuery);
async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if ((v !== undefined && ok(v)) || Date.now() >= end) {
      if (v === undefined) assert.fail('the entity was never read');
      return v;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

before(async () => {
  env = await timeSkippingEnv();
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
  });
  running = worker.run();
});
after(async () => {
  await Promise.all(guards.map((g) => g.close()));
  worker?.shutdown();
  await running;
  await env?.teardown();
  await Promise.all(geocoders.map((g) => new Promise((r) => g.server.close(r))));
});

describe('guard.run: the guard around any call', () => {
  test("returns fn's result; a fn that throws is reported and released, where a decision never released stalls", async () => {
    const primary = await geocoder();
    const key = name('released');
    // No trip in this test: the leaked decision must be let through.
    const g = guard('released', {
      stall: { initialMs: 300, floorMs: 300 },
      config: { minSamples: 1_000, volumeFloor: null },
    });
    assert.deepEqual(await g.run(key, lookup(primary)), { lon: 7.4474, lat: 46.948, crs: 'EPSG:4326' });
    await assert.rejects(
      g.run(key, () => Promise.reject(new Error('the parser failed'))),
      /the parser failed/,
    );
    primary.mode = 'down';
    await assert.rejects(g.run(key, lookup(primary)), /HTTP 503/);
    // Then a decision never released, as a caller without run might leave one: swept as a stall. Had either of
    // run's calls been left in flight, begun earlier, it would have stalled first, in the same sweep or before.
    assert.equal((await g.acquire(key)).kind, 'proceed');
    await until(
      () => Promise.resolve(g.stats.stalled),
      (stalled) => stalled > 0,
      10_000,
    );
    assert.equal(g.stats.stalled, 1, 'only the leaked decision stalled: no call of run was left in flight');
    await g.flush();
    const s = await status(key);
    assert.equal(s.figures.successes, 1);
    assert.ok(s.figures.transient >= 2, `the throw and the 503 were reported: ${JSON.stringify(s.figures)}`);
  });

  test('failures through run open a named breaker for every guard; then run refuses without calling fn, saying when to come back', async () => {
    const primary = await geocoder();
    primary.mode = 'down';
    const key = name('outage');
    const a = guard('outage-a');
    const b = guard('outage-b');
    for (let i = 0; i < 20; i++) await a.run(key, lookup(primary)).catch(() => undefined);
    await until(
      () => status(key),
      (s) => s.view.state === 'open',
    );
    const before = primary.requests;
    const refused = await until(
      () =>
        b.run(key, lookup(primary)).then(
          () => null,
          (err: unknown) => err,
        ),
      (err) => err instanceof BreakerRefusedError,
      3_000,
    );
    assert.ok(refused instanceof BreakerRefusedError);
    assert.equal(refused.key, key);
    assert.equal(refused.state, 'open');
    assert.ok(refused.retryAfterMs !== null && refused.retryAfterMs > 0, JSON.stringify(refused));
    assert.equal(primary.requests, before, 'a refused call never reaches the endpoint');
  });

  test("a cancelled call (the caller's signal) is abandoned: fn sees the abort, nothing is reported", async () => {
    const primary = await geocoder();
    primary.mode = 'hang';
    const key = name('cancelled');
    const g = guard('cancelled');
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('activity cancelled')), 100);
    await assert.rejects(g.run(key, lookup(primary), { signal: ac.signal }), /activity cancelled|aborted/);
    assert.equal(primary.requests, 1);
    // A success so the entity exists: only it is counted, not the cancelled call.
    primary.mode = 'ok';
    await g.run(key, lookup(primary));
    await g.flush();
    const s = await status(key);
    assert.deepEqual([s.figures.successes, s.figures.failures, s.figures.neutral], [1, 0, 0]);
    await assert.rejects(
      g.run(key, lookup(primary), { signal: AbortSignal.abort(new Error('cancelled before it began')) }),
      /cancelled before it began/,
    );
    assert.equal(primary.requests, 2, 'a call cancelled before it began sends nothing');
  });

  test("half-open: run makes the fleet's probe (fn is told), and its success closes the breaker", async () => {
    const primary = await geocoder();
    const key = name('probe');
    const config = { cooldownMs: 1_000, cooldownJitter: 0, probesToClose: 1, rampMs: 0 };
    const g = guard('probe', { config, probeSpreadMs: 0 });
    primary.mode = 'down';
    for (let i = 0; i < 20; i++) await g.run(key, lookup(primary)).catch(() => undefined);
    await until(
      () => status(key),
      (s) => s.view.state === 'open',
    );
    await env.sleep(1_500);
    await new Promise((r) => setTimeout(r, 1_100));
    primary.mode = 'ok';
    let probed = false;
    const place = await until(
      () =>
        g
          .run(key, (call) => ((probed ||= call.probe), lookup(primary)(call)))
          .catch((err: unknown) => {
            if (err instanceof BreakerRefusedError) return null;
            throw err;
          }),
      (p) => p !== null,
      5_000,
    );
    assert.ok(place);
    assert.equal(probed, true, 'the call that went was the probe');
    await until(
      () => status(key),
      (s) => s.view.state === 'closed',
    );
  });

  test("an answer that breaks the caller's contract is refused, never returned, and counted against the key", async () => {
    const mirror = await geocoder();
    mirror.mode = 'web-mercator';
    const key = name('contract');
    const g = guard('contract');
    const err = await g.run(key, lookup(mirror), { contract: inSwitzerland }).then(
      (v) => assert.fail(`returned ${JSON.stringify(v)}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ContractBreachError, String(err));
    assert.equal(err.why, 'crs EPSG:3857, not EPSG:4326');
    assert.equal(g.stats.contractBreaches, 1);
    await g.flush();
    const s = await until(
      () => status(key),
      () => true,
    );
    assert.equal(s.figures.serviceException, 1);
  });
});

describe('guard.runChain: providers in order, each behind its own breaker and held to the contract', () => {
  test('through an outage of the primary the fallback answers, the primary stops being called once its breaker opens; a fallback that breaks the contract is never returned', async () => {
    const primary = await geocoder();
    const fallback = await geocoder();
    const keys = { primary: name('chain-primary'), fallback: name('chain-fallback') };
    const g = guard('chain');
    const providers: Provider<Place>[] = [
      { key: keys.primary, name: 'primary', call: lookup(primary) },
      { key: keys.fallback, name: 'fallback', call: lookup(fallback) },
    ];
    const chain = () => g.runChain(providers, { contract: inSwitzerland });
    const healthy = await chain();
    assert.deepEqual([healthy.provider, healthy.index, healthy.passedOver], ['primary', 0, []]);
    assert.equal(fallback.requests, 0, 'the fallback is not asked while the primary answers');

    primary.mode = 'down';
    const during = [];
    for (let i = 0; i < 30; i++) during.push(await chain());
    assert.ok(
      during.every((r) => r.provider === 'fallback' && r.value.crs === 'EPSG:4326'),
      JSON.stringify(during.map((r) => r.provider)),
    );
    assert.equal(during[0]!.passedOver[0]!.why, 'failed');
    assert.match(during[0]!.passedOver[0]!.detail, /HTTP 503/);
    await until(
      () => status(keys.primary),
      (s) => s.view.state === 'open',
    );
    const sent = primary.requests;
    const later = await chain();
    assert.equal(later.passedOver[0]!.why, 'refused');
    assert.equal(primary.requests, sent, 'an open primary is passed over without a request');

    fallback.mode = 'web-mercator';
    const err = await chain().then(
      (v) => assert.fail(`returned ${JSON.stringify(v)}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ChainExhaustedError, String(err));
    assert.deepEqual(
      err.passedOver.map((p) => [p.provider, p.why]),
      [
        ['primary', 'refused'],
        ['fallback', 'breach'],
      ],
    );
    assert.match(err.message, /fallback breach \(crs EPSG:3857, not EPSG:4326\)/);
    assert.ok(err.retryAfterMs !== null && err.retryAfterMs > 0, 'it says when the primary may be tried again');
  });
});
