import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { classifyCall } from '../../src/activities/guard/call-outcome';
import { RunSlots } from '../../src/activities/guard/run-slots';

const kind = (settled: Parameters<typeof classifyCall>[0]) => classifyCall(settled).kind;
const thrown = async (f: () => Promise<unknown>): Promise<unknown> => {
  try {
    await f();
  } catch (err) {
    return err;
  }
  assert.fail('it did not throw');
};

describe("the default classification of a guarded call's result or error", () => {
  test('fetch Responses by their status, as a tile answer is judged; a 429 carries its Retry-After', async () => {
    const server = createServer((req, res) => {
      const status = Number(req.url!.slice(1));
      res.writeHead(status, status === 429 ? { 'retry-after': '7' } : {});
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const got: Record<number, unknown> = {};
      for (const status of [200, 204, 304, 400, 401, 403, 404, 408, 422, 429, 500, 502, 503, 504])
        got[status] = classifyCall({ ok: true, value: await fetch(`${base}/${status}`) });
      assert.deepEqual(got, {
        200: { kind: 'success' },
        204: { kind: 'success' },
        304: { kind: 'success' },
        400: { kind: 'permanent' },
        401: { kind: 'neutral' },
        403: { kind: 'neutral' },
        404: { kind: 'neutral' },
        408: { kind: 'transient' },
        422: { kind: 'permanent' },
        429: { kind: 'rate-limited', retryAfterMs: 7_000 },
        500: { kind: 'transient' },
        502: { kind: 'transient' },
        503: { kind: 'transient' },
        504: { kind: 'transient' },
      });
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  test("Node's network errors: no answer is the endpoint's failure, the worker's own resolver is local", async () => {
    // A port nobody listens on: fetch throws TypeError('fetch failed') with the socket's error as its cause.
    const free = createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
    const port = (free.address() as AddressInfo).port;
    await new Promise((r) => free.close(r));
    const refused = await thrown(() => fetch(`http://127.0.0.1:${port}/`));
    assert.equal(kind({ ok: false, error: refused }), 'transient');
    const dns = Object.assign(new Error('getaddrinfo ENOTFOUND geocoder.invalid'), { code: 'ENOTFOUND' });
    assert.equal(kind({ ok: false, error: new TypeError('fetch failed', { cause: dns }) }), 'local');
    const timeout = await thrown(() => fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(0) }));
    assert.equal(kind({ ok: false, error: timeout }), 'transient', String(timeout));
    for (const code of ['ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_SOCKET'])
      assert.equal(kind({ ok: false, error: Object.assign(new Error(code), { code }) }), 'transient', code);
  });

  test("HTTP clients' errors carrying a status; an answer that does not parse; a bug in the caller's code; anything else", () => {
    assert.equal(
      kind({ ok: false, error: Object.assign(new Error('Response code 502'), { response: { statusCode: 502 } }) }),
      'transient',
    );
    assert.equal(
      kind({
        ok: false,
        error: Object.assign(new Error('Request failed with status code 404'), { response: { status: 404 } }),
      }),
      'neutral',
    );
    assert.deepEqual(
      classifyCall({
        ok: false,
        error: Object.assign(new Error('429'), { status: 429, response: { headers: { 'retry-after': '2' } } }),
      }),
      {
        kind: 'rate-limited',
        retryAfterMs: 2_000,
      },
    );
    let parse: unknown;
    try {
      JSON.parse('<html><title>502 Bad Gateway</title></html>');
    } catch (err) {
      parse = err;
    }
    assert.equal(kind({ ok: false, error: parse }), 'service-exception');
    assert.equal(
      kind({ ok: false, error: new TypeError("Cannot read properties of undefined (reading 'lon')") }),
      'neutral',
    );
    assert.equal(kind({ ok: false, error: new Error('upstream said no') }), 'transient');
    assert.equal(kind({ ok: false, error: 'a string' }), 'transient');
    assert.equal(kind({ ok: true, value: { lon: 7.44, lat: 46.95 } }), 'success');
    assert.equal(kind({ ok: true, value: undefined }), 'success');
  });
});

describe("run's slots: a key's calls at once, scaled by the ramp", () => {
  test('at a quarter allowance of 8, two go at once and the third waits for a release', async () => {
    const slots = new RunSlots();
    slots.allowed('geo:a', 0.25);
    assert.equal(slots.limit('geo:a', 8), 2);
    const a = await slots.take('geo:a', 8);
    await slots.take('geo:a', 8);
    let third = false;
    const waiting = slots.take('geo:a', 8).then((free) => ((third = true), free));
    await new Promise((r) => setImmediate(r));
    assert.equal(third, false, 'the third call waits while two are in flight');
    a();
    await waiting;
    assert.equal(third, true);
    // The ramp ends: all eight.
    slots.allowed('geo:a', 1);
    assert.equal(slots.limit('geo:a', 8), 8);
    // Another key is not held by this one's; at least one call goes however small the allowance.
    slots.allowed('geo:b', 0.01);
    assert.equal(slots.limit('geo:b', 8), 1);
  });

  test('waiting calls get their slots in turn, and a newcomer never overtakes one', async () => {
    const slots = new RunSlots();
    const order: string[] = [];
    const a = await slots.take('geo:d', 1);
    const w1 = slots.take('geo:d', 1).then((free) => (order.push('w1'), free));
    const w2 = slots.take('geo:d', 1).then((free) => (order.push('w2'), free));
    a();
    // The slot A freed is W1's already: a newcomer now waits behind W2.
    const late = slots.take('geo:d', 1).then((free) => (order.push('late'), free));
    (await w1)();
    (await w2)();
    (await late)();
    assert.deepEqual(order, ['w1', 'w2', 'late']);
  });

  test('a growing allowance lets waiting calls through without a call ending', async () => {
    const slots = new RunSlots();
    slots.allowed('geo:e', 0.25);
    await slots.take('geo:e', 4);
    let waited = false;
    const waiting = slots.take('geo:e', 4).then(() => (waited = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(waited, false);
    slots.allowed('geo:e', 1);
    await waiting;
    assert.equal(waited, true);
  });

  test("a call waiting for a slot is let go when the caller's signal aborts, with its reason", async () => {
    const slots = new RunSlots();
    await slots.take('geo:c', 1);
    const ac = new AbortController();
    const waiting = slots.take('geo:c', 1, ac.signal);
    ac.abort(new Error('activity cancelled'));
    await assert.rejects(waiting, /activity cancelled/);
  });
});
