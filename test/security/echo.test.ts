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
/** A secret with characters each encoding spells differently (form, URI, JSON). */
const ODD = `Sk!(live)~'9*z Q"\\${CANARY}`;
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-echo-'));
const pools = new EndpointPools();
let server: Server;
let base: string;

before(async () => {
  // A server that quotes the request back, as some WMS ServiceExceptions and error pages do.
  server = createServer((req, res) => {
    const key = String(req.headers['x-api-key'] ?? '');
    const quoted = `${req.url} auth=${req.headers['authorization'] ?? ''} key=${key}`;
    const status = req.url!.startsWith('/500') ? 500 : 200;
    if (req.url!.startsWith('/html')) {
      // A title quoting the request, escaped as HTML would not be: the reason JSON-escapes it.
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<html><head><title>bad request ${req.url!} ${key}</title></head></html>`);
      return;
    }
    // Padding puts the echo across the reason's 500-character cut.
    const pad = req.url!.startsWith('/long') ? 'x'.repeat(470) : '';
    res.writeHead(status, { 'content-type': 'application/vnd.ogc.se_xml' });
    res.end(
      `<?xml version="1.0"?><ServiceExceptionReport version="1.1.1"><ServiceException code="InvalidParameterValue">bad request ${pad}${quoted}</ServiceException></ServiceExceptionReport>`,
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.TB_ECHO_TOKEN = CANARY;
  process.env.TB_ECHO_USER = 'echo-user';
  process.env.TB_ECHO_ODD = ODD;
});
after(async () => {
  await pools.close();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

test("a credential the server quotes back never reaches a tile's reason, whatever the auth type", async () => {
  const auths: SourceInput['auth'][] = [
    { type: 'bearer', tokenEnv: 'TB_ECHO_TOKEN' },
    { type: 'basic', userEnv: 'TB_ECHO_USER', passwordEnv: 'TB_ECHO_TOKEN' },
    { type: 'header', header: 'X-Api-Key', valueEnv: 'TB_ECHO_TOKEN' },
    { type: 'query', param: 'key', valueEnv: 'TB_ECHO_TOKEN' },
  ];
  for (const prefix of ['/200', '/500']) {
    for (const auth of auths) {
      const source = parseSource({ type: 'xyz', url: `${base}${prefix}/{z}/{x}/{y}.png`, auth });
      const [r] = await makeFetchBatch({ pools })({
        sourceName: 'echo',
        source,
        tiles: [{ z: 1, x: 0, y: 0 }],
        storeRoot: dir,
        breaker: false,
        retry: { attempts: 1 },
      });
      assert.equal(r!.status, 'failed');
      // The echo made it into the reason (so the check below looks at something), masked.
      assert.match(r!.reason, /bad request/, r!.reason);
      assert.match(r!.reason, /\*\*\*/, r!.reason);
      assert.ok(!r!.reason.includes(CANARY), `${auth!.type} ${prefix}: ${r!.reason}`);
      if (auth!.type === 'basic')
        assert.ok(!r!.reason.includes(Buffer.from(`echo-user:${CANARY}`).toString('base64')), r!.reason);
    }
  }
});

test('an echoed credential is masked before the reason is cut or escaped, in every encoding', async () => {
  const cases: [string, SourceInput['auth']][] = [
    ['/200', { type: 'query', param: 'key', valueEnv: 'TB_ECHO_ODD' }],
    ['/long', { type: 'bearer', tokenEnv: 'TB_ECHO_TOKEN' }],
    ['/html', { type: 'header', header: 'X-Api-Key', valueEnv: 'TB_ECHO_ODD' }],
    ['/html', { type: 'query', param: 'key', valueEnv: 'TB_ECHO_ODD' }],
  ];
  for (const [prefix, auth] of cases) {
    const source = parseSource({ type: 'xyz', url: `${base}${prefix}/{z}/{x}/{y}.png`, auth });
    const [r] = await makeFetchBatch({ pools })({
      sourceName: 'echo',
      source,
      tiles: [{ z: 1, x: 0, y: 0 }],
      storeRoot: dir,
      breaker: false,
      retry: { attempts: 1 },
    });
    assert.match(r!.reason, /bad request/, r!.reason);
    for (const piece of [CANARY, CANARY.slice(0, 10), 'Sk!(live)', 'Sk%21', 'Sk!%28'])
      assert.ok(!r!.reason.includes(piece), `${prefix} ${auth!.type}: ${piece} in ${r!.reason}`);
  }
});
