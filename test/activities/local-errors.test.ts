import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent, ProxyAgent } from 'undici';
import { fetchUrl } from '../../src/activities/http/fetch-url';
import { localCause } from '../../src/activities/http/local-errors';
import { classify, type Verdict } from '../../src/activities/validate/classify';
import { refusedPort } from '../helpers/fault-server';

/** A resolver that fails every lookup with `code`, as a worker's broken DNS would. */
function failingResolver(code: string) {
  return (host: string, _opts: unknown, cb: (err: Error) => void) => {
    const err = Object.assign(new Error(`getaddrinfo ${code} ${host}`), {
      code,
      syscall: 'getaddrinfo',
      hostname: host,
    });
    process.nextTick(() => cb(err));
  };
}

async function judge(url: string, dispatcher: Agent | ProxyAgent): Promise<Verdict> {
  const x = await fetchUrl(url, { dispatcher, headers: {}, signal: AbortSignal.timeout(5_000) });
  return classify(x, { width: 256, height: 256, blankIsFailure: false });
}

describe('local-origin errors: the worker failed, not the endpoint', () => {
  // An egress proxy that refuses every tunnel with 407, as a proxy whose credentials the worker lacks does.
  let proxy: Server;
  before(async () => {
    proxy = createServer((_req, res) => res.writeHead(502).end());
    proxy.on('connect', (_req, socket) => socket.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n'));
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    await new Promise<void>((r) => proxy.close(() => r()));
  });

  for (const code of ['ENOTFOUND', 'EAI_AGAIN']) {
    test(`a resolver failing with ${code} is local, and the reason says so`, async () => {
      const agent = new Agent({ connect: { lookup: failingResolver(code) as never } });
      try {
        const v = await judge('http://tiles.example.test:8080/1/0/0.png', agent);
        assert.equal(v.kind, 'local');
        assert.match(v.reason, new RegExp(`^local: DNS resolution failed.*${code}`));
        assert.equal(v.httpStatus, null);
      } finally {
        await agent.close();
      }
    });
  }

  test('an egress proxy refusing the tunnel (407 from the proxy itself) is local', async () => {
    const agent = new ProxyAgent(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
    try {
      const v = await judge('https://tiles.example.test/1/0/0.png', agent);
      assert.equal(v.kind, 'local');
      assert.match(v.reason, /egress proxy refused the tunnel \(HTTP 407\)/);
    } finally {
      await agent.close();
    }
  });

  test('a refused connection to the endpoint stays transient: it is the endpoint that is down', async () => {
    const agent = new Agent();
    try {
      const v = await judge(`http://127.0.0.1:${await refusedPort()}/1/0/0.png`, agent);
      assert.equal(v.kind, 'transient');
    } finally {
      await agent.close();
    }
  });

  test('codes: descriptor and address exhaustion are local; resets and timeouts are not', () => {
    for (const code of ['EADDRNOTAVAIL', 'EMFILE', 'ENFILE', 'ENOBUFS']) assert.ok(localCause(code, 'x'), code);
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_ABORTED'])
      assert.equal(localCause(code, 'x'), null, code);
  });
});
