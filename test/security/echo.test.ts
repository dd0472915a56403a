import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { makeFetchBatch } from '../../src/activities/fetch/fetch-batch';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { parseSource, type SourceInput } from '../../src/sources/schema';

const CANARY = 'echo-canary-4d1f0b2a';
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-echo-'));
const pools = new EndpointPools();
let server: Server;
let base: string;

before(async () => {
  // A server that quotes the request back, as some WMS ServiceExceptions and error pages do.
  server = createServer((req, res) => {
    const quoted = `${req.url} auth=${req.headers['authorization'] ?? ''} key=${req.headers['x-api-key'] ?? ''}`;
    const status = req.url!.startsWith('/500') ? 500 : 200;
    res.writeHead(status, { 'content-type': 'application/vnd.ogc.se_xml' });
    res.end(`<?xml version="1.0"?><ServiceExceptionReport version="1.1.1"><ServiceException code="InvalidParameterValue">bad request ${quoted}</ServiceException></ServiceExceptionReport>`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.TB_ECHO_TOKEN = CANARY;
  process.env.TB_ECHO_USER = 'echo-user';
});
after(async () => {
  await pools.close();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

test('a credential the server quotes back never reaches a tile\'s reason, whatever the auth type', async () => {
  const auths: SourceInput['auth'][] = [
    { type: 'bearer', tokenEnv: 'TB_ECHO_TOKEN' },
    { type: 'basic', userEnv: 'TB_ECHO_USER', passwordEnv: 'TB_ECHO_TOKEN' },
    { type: 'header', header: 'X-Api-Key', valueEnv: 'TB_ECHO_TOKEN' },
    { type: 'query', param: 'key', valueEnv: 'TB_ECHO_TOKEN' },
  ];
  for (const prefix of ['/200', '/500']) {
    for (const auth of auths) {
      const source = parseSource({ type: 'xyz', url: `${base}${prefix}/{z}/{x}/{y}.png`, auth });
      const [r] = await makeFetchBatch({ pools })({ sourceName: 'echo', source, tiles: [{ z: 1, x: 0, y: 0 }], storeRoot: dir, breaker: false, retry: { attempts: 1 } });
      assert.equal(r!.status, 'failed');
      // The echo made it into the reason (so the check below looks at something), masked.
      assert.match(r!.reason, /bad request/, r!.reason);
      assert.match(r!.reason, /\*\*\*/, r!.reason);
      assert.ok(!r!.reason.includes(CANARY), `${auth!.type} ${prefix}: ${r!.reason}`);
      if (auth!.type === 'basic') assert.ok(!r!.reason.includes(Buffer.from(`echo-user:${CANARY}`).toString('base64')), r!.reason);
    }
  }
});
