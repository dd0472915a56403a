import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { probeEndpoint } from '../../src/activities/probe';
import { refusedPort, startFaultServer, type FaultServer } from '../helpers/fault-server';

let server: FaultServer;
before(async () => {
  server = await startFaultServer();
});
after(async () => {
  await server.close();
});

test("the entity's probe judges its answer as the pipeline judges a tile", async () => {
  assert.equal((await probeEndpoint({ url: `${server.url}/ok/0/0/0.png` })).outcome, 'success');
  assert.equal(
    (await probeEndpoint({ url: `${server.url}/ok/0/0/0.png`, contentTypePrefix: 'image/' })).outcome,
    'success',
  );
  // A 200 that is not a good tile is a failure, not health.
  assert.equal((await probeEndpoint({ url: `${server.url}/truncated-png` })).outcome, 'service-exception');
  assert.equal((await probeEndpoint({ url: `${server.url}/se-111` })).outcome, 'service-exception');
  assert.equal((await probeEndpoint({ url: `${server.url}/html` })).outcome, 'service-exception');
  assert.equal((await probeEndpoint({ url: `${server.url}/status/503` })).outcome, 'transient');
  assert.equal((await probeEndpoint({ url: `${server.url}/status/404` })).outcome, 'neutral');
  const limited = await probeEndpoint({ url: `${server.url}/status/429?retryAfter=4` });
  assert.deepEqual([limited.outcome, limited.retryAfterMs], ['rate-limited', 4_000]);
  const refused = await probeEndpoint({ url: `http://127.0.0.1:${await refusedPort()}/x` });
  assert.deepEqual([refused.outcome, refused.httpStatus], ['transient', null]);
});

test('a non-image probe (GetCapabilities-style) is healthy on a 2xx of its type; okStatuses overrides', async () => {
  assert.equal(
    (await probeEndpoint({ url: `${server.url}/json`, contentTypePrefix: 'application/json' })).outcome,
    'success',
  );
  // An XML probe still sees a ServiceException for what it is when the type is not the one asked for.
  assert.equal(
    (await probeEndpoint({ url: `${server.url}/se-111`, contentTypePrefix: 'application/json' })).outcome,
    'service-exception',
  );
  assert.equal(
    (await probeEndpoint({ url: `${server.url}/ok-jpeg/0/0/0.jpg`, contentTypePrefix: 'image/png' })).outcome,
    'service-exception',
  );
  assert.equal((await probeEndpoint({ url: `${server.url}/status/404`, okStatuses: [404] })).outcome, 'success');
});

test('a probe that names a source sends its credentials, read on the worker at probe time, and only to that source', async () => {
  const png = await sharp({ create: { width: 256, height: 256, channels: 3, background: { r: 10, g: 120, b: 200 } } })
    .png()
    .toBuffer();
  const seen: (string | undefined)[] = [];
  const guarded = createServer((req, res) => {
    seen.push(req.headers.authorization);
    if (req.headers.authorization !== 'Bearer s3cret-token') res.writeHead(401).end('no');
    else res.writeHead(200, { 'content-type': 'image/png' }).end(png);
  });
  await new Promise<void>((resolve) => guarded.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(guarded.address() as AddressInfo).port}`;
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-probe-sources-'));
  const file = path.join(dir, 'sources.yaml');
  writeFileSync(
    file,
    `sources:\n  ortho:\n    type: xyz\n    url: ${origin}/tiles/{z}/{x}/{y}.png\n    auth: { type: bearer, tokenEnv: TB_PROBE_TEST_TOKEN }\n`,
  );
  const roots = { sources: [dir], outputs: [dir] };
  const spec = { url: `${origin}/tiles/3/1/2.png`, source: { file, name: 'ortho' } };
  process.env['TB_PROBE_TEST_TOKEN'] = 's3cret-token';
  try {
    const ok = await probeEndpoint(spec, undefined, origin, roots);
    assert.equal(ok.outcome, 'success', ok.reason);
    assert.deepEqual(seen, ['Bearer s3cret-token']);
    // Not this breaker's endpoint, not the source's origin, a file outside the roots, a variable unset: not sent.
    const refusals = [
      await probeEndpoint(spec, undefined, 'http://127.0.0.1:1', roots),
      await probeEndpoint({ ...spec, url: 'http://127.0.0.1:1/tiles/3/1/2.png' }, undefined, undefined, roots),
      await probeEndpoint(spec, undefined, undefined, { sources: [tmpdir() + '/elsewhere'], outputs: [] }),
      await probeEndpoint(spec, undefined, undefined, undefined),
    ];
    delete process.env['TB_PROBE_TEST_TOKEN'];
    refusals.push(await probeEndpoint(spec, undefined, undefined, roots));
    for (const r of refusals) {
      assert.equal(r.outcome, 'permanent');
      assert.match(r.reason, /^probe not sent: /);
      assert.doesNotMatch(r.reason, /s3cret/);
    }
    assert.match(refusals[0]!.reason, /not this breaker's endpoint/);
    assert.match(refusals[4]!.reason, /TB_PROBE_TEST_TOKEN is not set/);
    assert.equal(seen.length, 1, 'nothing sent for any refusal');
  } finally {
    delete process.env['TB_PROBE_TEST_TOKEN'];
    guarded.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
