import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { classify } from '../../src/activities/validate/classify';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';

// The proxy sits in front of the real MapServer fixture (cgi-mapserver, lighttpd, gdal-bin: .ci/run installs them).
const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';
let wms: Wms;
let proxy: FaultProxy;

/** A GetMap of the fixture's north-east quadrant, WIDTH x HEIGHT 256 unless told. */
const getMap = (size = 256) =>
  `${proxy.url}?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=quadrants&STYLES=&CRS=EPSG:3857&BBOX=1000,1000,2000,2000&WIDTH=${size}&HEIGHT=${size}&FORMAT=image/png`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  ms: number;
}

/** One request on a fresh connection; rejects with the socket's error code, or 'timeout' after `timeoutMs`. */
function get(url: string, timeoutMs = 5_000): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          ms: Date.now() - started,
        }),
      );
      res.on('error', (err: NodeJS.ErrnoException) => reject(new Error(err.code ?? err.message)));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(err.code ?? err.message)));
    req.end();
  });
}

const expected = { width: 256, height: 256, blankIsFailure: true };
const asFetched = (a: Answer) => ({
  url: getMap(),
  status: a.status,
  headers: Object.fromEntries(Object.entries(a.headers).map(([k, v]) => [k, String(v)])),
  body: a.body,
  latencyMs: a.ms,
});

describe('the fault proxy in front of MapServer', { skip }, () => {
  before(async () => {
    wms = await startWms();
    proxy = await startFaultProxy(wms.url);
  });
  after(async () => {
    await proxy?.close();
    await wms?.stop();
  });

  test("pass forwards MapServer's answer, and every request is logged with its time and mode", async () => {
    const before = Date.now();
    const a = await get(getMap());
    assert.equal(a.status, 200);
    assert.equal((await classify(asFetched(a), expected)).kind, 'success');
    const { channels } = await sharp(a.body).stats();
    assert.ok(
      channels[0]!.mean > 200 && channels[2]!.mean < 80,
      'the north-east quadrant is red: the real server drew it',
    );
    assert.equal(proxy.countBetween(before), 1);
    assert.equal(proxy.log.at(-1)!.mode, 'pass');
    assert.ok(proxy.log.at(-1)!.upstreamMs! >= 0, "the upstream's answer time is logged");
  });

  test('hang accepts and never answers; leaving hang drops the held connections (the recovery burst)', async () => {
    await proxy.set('hang');
    const hung = [get(getMap(), 10_000), get(getMap(), 10_000)];
    const outcomes = Promise.allSettled(hung);
    for (let i = 0; i < 100 && proxy.held < 2; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(proxy.held, 2, 'both requests are held');
    await proxy.set('pass');
    const settled = await outcomes;
    assert.ok(
      settled.every((s) => s.status === 'rejected' && /ECONNRESET|socket hang up/.test(String(s.reason))),
      JSON.stringify(settled.map((s) => (s.status === 'rejected' ? String(s.reason) : s.value.status))),
    );
    assert.equal(proxy.held, 0);
    assert.equal(proxy.dropped, 2, 'the burst: both held connections dropped');
    assert.equal((await get(getMap())).status, 200, 'answers again after the drop');
  });

  test('slow delays each answer by slowMs and then forwards it', async () => {
    await proxy.set('slow', { slowMs: 400 });
    const a = await get(getMap());
    await proxy.set('pass');
    assert.equal(a.status, 200);
    assert.ok(a.ms >= 400, `answered after ${a.ms} ms`);
    assert.equal((await classify(asFetched(a), expected)).kind, 'success');
  });

  test("service-exception answers 200 with a ServiceException that does not blame the request: a service exception, not the request's fault", async () => {
    await proxy.set('service-exception');
    const a = await get(getMap());
    await proxy.set('pass');
    assert.equal(a.status, 200);
    assert.match(a.body.toString(), /<ServiceException>msDrawMap\(\)/);
    assert.doesNotMatch(a.body.toString(), /code=/);
    assert.equal((await classify(asFetched(a), expected)).kind, 'service-exception');
  });

  test('503 answers with Retry-After', async () => {
    await proxy.set('503', { retryAfterS: 2 });
    const a = await get(getMap());
    await proxy.set('pass');
    assert.equal(a.status, 503);
    assert.equal(a.headers['retry-after'], '2');
    const v = await classify(asFetched(a), expected);
    assert.deepEqual([v.kind, v.retryAfterMs], ['transient', 2_000]);
  });

  test('refused stops listening (connections refused, nothing logged); pass listens again on the same port', async () => {
    await proxy.set('refused');
    const n = proxy.log.length;
    await assert.rejects(get(getMap()), /ECONNREFUSED/);
    assert.equal(proxy.log.length, n, 'a refused connection is never received');
    await proxy.set('pass');
    assert.equal((await get(getMap())).status, 200);
  });

  test('reset destroys the socket before any answer', async () => {
    await proxy.set('reset');
    await assert.rejects(get(getMap()), /ECONNRESET|socket hang up/);
    await proxy.set('pass');
  });

  test('blank answers 200 with a uniform image of the requested size: caught only where blank is a failure', async () => {
    await proxy.set('blank');
    const a = await get(getMap(300));
    await proxy.set('pass');
    const meta = await sharp(a.body).metadata();
    assert.deepEqual([a.status, meta.width, meta.height], [200, 300, 300]);
    const { channels } = await sharp(a.body).stats();
    assert.ok(
      channels.every((c) => c.min === c.max),
      'uniform',
    );
    const size = { width: 300, height: 300 };
    assert.equal((await classify(asFetched(a), { ...size, blankIsFailure: true })).kind, 'service-exception');
    assert.equal((await classify(asFetched(a), { ...size, blankIsFailure: false })).kind, 'success');
  });

  test('error-image answers 200 with an error drawn into an image of the right size: undetectable, it classifies as a tile', async () => {
    await proxy.set('error-image');
    const a = await get(getMap());
    await proxy.set('pass');
    const meta = await sharp(a.body).metadata();
    assert.deepEqual([a.status, meta.width, meta.height], [200, 256, 256]);
    const { channels } = await sharp(a.body).stats();
    assert.ok(
      channels.some((c) => c.min !== c.max),
      'not uniform',
    );
    assert.equal((await classify(asFetched(a), expected)).kind, 'success');
  });

  test('a scheduled fault starts after N requests (the Nth+1 is answered in it) and ends by itself after forMs', async () => {
    proxy.schedule({ mode: '503', afterRequests: 2, forMs: 300 });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(getMap())).status);
    assert.deepEqual(statuses, [200, 200, 503]);
    assert.ok(proxy.faultStartedAt !== null && proxy.recoveredAt === null);
    await proxy.settled();
    assert.ok(proxy.recoveredAt! - proxy.faultStartedAt >= 300);
    assert.equal((await get(getMap())).status, 200);
    assert.equal(proxy.countBetween(proxy.faultStartedAt, proxy.recoveredAt!), 1);
  });
});
