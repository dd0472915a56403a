import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
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
  assert.equal((await probeEndpoint({ url: `${server.url}/ok/0/0/0.png`, contentTypePrefix: 'image/' })).outcome, 'success');
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
  assert.equal((await probeEndpoint({ url: `${server.url}/json`, contentTypePrefix: 'application/json' })).outcome, 'success');
  // An XML probe still sees a ServiceException for what it is when the type is not the one asked for.
  assert.equal((await probeEndpoint({ url: `${server.url}/se-111`, contentTypePrefix: 'application/json' })).outcome, 'service-exception');
  assert.equal((await probeEndpoint({ url: `${server.url}/ok-jpeg/0/0/0.jpg`, contentTypePrefix: 'image/png' })).outcome, 'service-exception');
  assert.equal((await probeEndpoint({ url: `${server.url}/status/404`, okStatuses: [404] })).outcome, 'success');
});
