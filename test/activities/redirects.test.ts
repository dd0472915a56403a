import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent } from 'undici';
import { makeFetchBatch, type FetchBatchInput } from '../../src/activities/fetch/fetch-batch';
import type { CallOutcome, GuardDecision } from '../../src/activities/guard';
import { redactUrl } from '../../src/activities/http/credentials';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { fetchUrl } from '../../src/activities/http/fetch-url';
import {
  DEFAULT_REDIRECT_POLICY,
  nextHop,
  REDIRECT_REFUSED,
  withoutCredentials,
  type RedirectPolicy,
} from '../../src/activities/http/redirects';
import { probeEndpoint } from '../../src/activities/probe';
import { classify } from '../../src/activities/validate/classify';
import { parseSource } from '../../src/sources/schema';
import { gradientImage } from '../helpers/images';

const CANARY = 'canary-7f3a91';
const USER = 'canary-user';
const BASIC = Buffer.from(`${USER}:${CANARY}`).toString('base64');

const policy = (p: Partial<RedirectPolicy> = {}): RedirectPolicy => ({ ...DEFAULT_REDIRECT_POLICY, ...p });

describe('the redirect policy decision', () => {
  const src = 'http://tiles.example/a/1.png';

  test('same origin, relative or absolute, is followed with credentials', () => {
    assert.deepEqual(nextHop([src], '/b/1.png', policy()), {
      follow: true,
      url: 'http://tiles.example/b/1.png',
      credentials: true,
    });
    assert.deepEqual(nextHop([src], 'http://TILES.example:80/c#frag', policy()), {
      follow: true,
      url: 'http://tiles.example/c',
      credentials: true,
    });
  });

  test('an upgrade to https on the same hostname is followed; https to http never, not even on the same host', () => {
    assert.deepEqual(nextHop([src], 'https://tiles.example/a/1.png', policy()), {
      follow: true,
      url: 'https://tiles.example/a/1.png',
      credentials: true,
    });
    const down = nextHop(
      ['https://tiles.example/a'],
      'http://tiles.example/a',
      policy({ allowHosts: ['tiles.example'] }),
    );
    assert.deepEqual(down, {
      follow: false,
      reason: 'redirect refused: https://tiles.example/a -> http://tiles.example/a: from https to http',
    });
    // Only between the default ports: another port may be another service.
    assert.equal(nextHop(['http://tiles.example:8080/a'], 'https://tiles.example:8443/a', policy()).follow, false);
    assert.equal(nextHop([src], 'https://tiles.example:8443/a', policy()).follow, false);
    // An upgrade to another host is another host.
    assert.equal(nextHop([src], 'https://cdn.example/a', policy()).follow, false);
  });

  test('only http and https targets', () => {
    for (const loc of ['ftp://tiles.example/a', 'file:///etc/passwd', 'javascript:alert(1)', 'data:text/plain,x']) {
      const h = nextHop([src], loc, policy({ allowHosts: ['tiles.example'] }));
      assert.equal(h.follow, false, loc);
      if (!h.follow) assert.match(h.reason, /only http and https are followed/);
    }
    const bad = nextHop([src], 'http://[not a url', policy());
    assert.deepEqual(bad, {
      follow: false,
      reason: 'redirect refused: http://tiles.example/a/1.png -> a Location that is not a URL',
    });
  });

  test('another host only when listed: a hostname allows any port, host:port only that port', () => {
    assert.deepEqual(nextHop([src], 'http://cdn.example/t.png', policy()), {
      follow: false,
      reason:
        'redirect refused: http://tiles.example/a/1.png -> http://cdn.example/t.png: to another host cdn.example:80 not in redirects.allowHosts',
    });
    // Another port of the same host is another origin.
    assert.equal(nextHop([src], 'http://tiles.example:8080/a', policy()).follow, false);
    assert.deepEqual(nextHop([src], 'http://cdn.example:8080/t.png', policy({ allowHosts: ['CDN.example'] })), {
      follow: true,
      url: 'http://cdn.example:8080/t.png',
      credentials: false,
    });
    assert.deepEqual(nextHop([src], 'https://cdn.example/t.png', policy({ allowHosts: ['cdn.example:443'] })), {
      follow: true,
      url: 'https://cdn.example/t.png',
      credentials: false,
    });
    const port = nextHop([src], 'https://cdn.example:8443/t.png', policy({ allowHosts: ['cdn.example:443'] }));
    assert.equal(port.follow, false);
    if (!port.follow) assert.match(port.reason, /to another host cdn\.example:8443 not in redirects\.allowHosts/);
    assert.equal(nextHop([src], 'http://[::1]:81/t', policy({ allowHosts: ['[::1]:81'] })).follow, true);
  });

  test('credentials go to a listed host only with sendCredentials', () => {
    const h = nextHop(
      [src],
      'http://cdn.example/t.png',
      policy({ allowHosts: ['cdn.example'], sendCredentials: true }),
    );
    assert.deepEqual(h, { follow: true, url: 'http://cdn.example/t.png', credentials: true });
  });

  test('a URL visited twice is a loop (fragment and the auth parameter aside)', () => {
    const chain = ['http://tiles.example/a?key=s3cret', 'http://cdn.example/b'];
    const h = nextHop(chain, 'http://tiles.example/a#x', policy({ allowHosts: ['cdn.example'] }), 'key');
    assert.deepEqual(h, {
      follow: false,
      reason:
        'redirect loop: http://tiles.example/a?key=*** -> http://cdn.example/b -> http://tiles.example/a: http://tiles.example/a visited twice',
    });
    assert.equal(nextHop([src], src, policy()).follow, false);
  });

  test('more hops than maxRedirects', () => {
    const chain = ['http://t.example/0', 'http://t.example/1', 'http://t.example/2', 'http://t.example/3'];
    assert.equal(nextHop(chain.slice(0, 3), '/3', policy()).follow, true);
    const h = nextHop(chain, '/4', policy());
    assert.deepEqual(h, {
      follow: false,
      reason:
        'redirect refused: more than 3 redirects (maxRedirects): http://t.example/0 -> http://t.example/1 -> http://t.example/2 -> http://t.example/3 -> http://t.example/4',
    });
    const none = nextHop([src], '/b', policy({ maxRedirects: 0 }));
    assert.equal(none.follow, false);
    if (!none.follow) assert.match(none.reason, /more than 0 redirects/);
  });

  test('reasons mask userinfo and the auth query parameter', () => {
    const h = nextHop(
      ['http://tiles.example/a?key=s3cret'],
      `http://u:${CANARY}@evil.example/x?key=${CANARY}`,
      policy(),
      'key',
    );
    assert.equal(h.follow, false);
    if (!h.follow) {
      assert.equal(
        h.reason,
        'redirect refused: http://tiles.example/a?key=*** -> http://***@evil.example/x?key=***: to another host evil.example:80 not in redirects.allowHosts',
      );
      assert.ok(!h.reason.includes(CANARY) && !h.reason.includes('s3cret'));
    }
    assert.equal(redactUrl(`https://u:p@t.example/x`, undefined), 'https://***@t.example/x');
    assert.equal(redactUrl('https://t.example/x?a=1', undefined), 'https://t.example/x?a=1');
  });

  test('a hop without credentials drops the auth header and every credential-like header, not conditional ones', () => {
    const headers = {
      'user-agent': 'tb',
      Authorization: 'Bearer x',
      'proxy-authorization': 'x',
      cookie: 'x',
      'X-Tile-Key': 'x',
      'x-api-key': 'x',
      'x-apikey': 'x',
      'x-auth-token': 'x',
      'x-client-secret': 'x',
      'x-password': 'x',
      'x-session-id': 'x',
      'if-none-match': '"v1"',
      'if-modified-since': 'Sun, 01 Nov 2026 00:00:00 GMT',
    };
    assert.deepEqual(withoutCredentials(headers, { type: 'header', header: 'x-tile-key', valueEnv: 'K' }), {
      'user-agent': 'tb',
      'if-none-match': '"v1"',
      'if-modified-since': 'Sun, 01 Nov 2026 00:00:00 GMT',
    });
  });

  test('the source schema: redirects is optional and strict, allowHosts entries are hosts', () => {
    const base = { type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png' };
    assert.equal(parseSource(base).redirects, undefined);
    assert.deepEqual(
      parseSource({ ...base, redirects: { allowHosts: ['cdn.example', 'cdn.example:8443', '[::1]:81'] } }).redirects,
      {
        allowHosts: ['cdn.example', 'cdn.example:8443', '[::1]:81'],
        sendCredentials: false,
      },
    );
    for (const bad of [
      { allowHosts: ['https://cdn.example'] },
      { allowHosts: ['cdn.example/x'] },
      { allowHosts: ['cdn.example:70000'] },
      { allowHosts: [], follow: true },
      {},
    ]) {
      assert.throws(() => parseSource({ ...base, redirects: bad }), /redirects/, JSON.stringify(bad));
    }
  });
});

// Two "hosts" on loopback: the source's own (127.0.0.1) and another (127.0.0.2), each recording what it saw.
interface Seen {
  url: string;
  headers: IncomingHttpHeaders;
}
interface Host {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}
type Route = (pathname: string, search: string) => { status: number; location: string } | null;

let png: Buffer;
let a: Host;
let b: Host;
let tls: Host | null = null;
const root = mkdtempSync(path.join(tmpdir(), 'tilebreaker-redirects-'));
// A self-signed certificate for 127.0.0.1, made now so that tests can be skipped without openssl.
const cert = makeCert(root);
const pools = new EndpointPools();

async function startHost(address: string, route: Route, cert?: { key: string; cert: string }): Promise<Host> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    const u = new URL(req.url ?? '/', 'http://x');
    const r = route(u.pathname, u.search);
    // A body on the redirect, which the client must read off before following.
    if (r)
      return res
        .writeHead(r.status, { location: r.location, 'content-type': 'text/html' })
        .end('<html>moved</html>'.repeat(100));
    if (u.pathname.startsWith('/tile/')) return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    return res.writeHead(404).end();
  };
  const server = cert ? createTlsServer(cert, handle) : createServer(handle);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  return {
    url: `${cert ? 'https' : 'http'}://${address}:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

// The source's host: /to-b echoes its query (a server passing the key along) to the other host; /same and
// /up drop it; /loop goes to the other host, which sends it back; /ping and /pong loop within the source;
// /chain/N takes N hops; /down (on the https host) is https -> http.
const routeA: Route = (p, search) => {
  const rest = (prefix: string) => p.slice(prefix.length);
  if (p.startsWith('/to-b/')) return { status: 302, location: `${b.url}/tile/${rest('/to-b/')}${search}` };
  if (p.startsWith('/to-b-userinfo/'))
    return {
      status: 307,
      location: `http://u:${CANARY}@${new URL(b.url).host}/tile/${rest('/to-b-userinfo/')}${search}`,
    };
  if (p.startsWith('/same/')) return { status: 301, location: `/tile/${rest('/same/')}` };
  if (p.startsWith('/up/')) return { status: 308, location: `${tls!.url}/tile/${rest('/up/')}` };
  if (p.startsWith('/loop/')) return { status: 302, location: `${b.url}${p}${search}` };
  if (p.startsWith('/ping/')) return { status: 302, location: `/pong/${rest('/ping/')}` };
  if (p.startsWith('/pong/')) return { status: 302, location: `/ping/${rest('/pong/')}` };
  const chain = /^\/chain\/(\d+)\/(.*)$/.exec(p);
  if (chain)
    return {
      status: 302,
      location: Number(chain[1]) > 1 ? `/chain/${Number(chain[1]) - 1}/${chain[2]}` : `/tile/${chain[2]}`,
    };
  return null;
};
const routeB: Route = (p, search) =>
  p.startsWith('/loop/') ? { status: 303, location: `${a.url}${p}${search}` } : null;
const routeTls: Route = (p) =>
  p.startsWith('/down/') ? { status: 302, location: `${a.url}/tile/${p.slice('/down/'.length)}` } : null;

function makeCert(dir: string): { key: string; cert: string } | null {
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    return {
      key: readFileSync(path.join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
    };
  } catch {
    return null;
  }
}

before(async () => {
  png = await gradientImage(256, 256, 'png');
  a = await startHost('127.0.0.1', routeA);
  b = await startHost('127.0.0.2', routeB);
  if (cert) tls = await startHost('127.0.0.1', routeTls, cert);
  process.env.TB_REDIRECT_CANARY = CANARY;
  process.env.TB_REDIRECT_USER = USER;
});
after(async () => {
  delete process.env.TB_REDIRECT_CANARY;
  delete process.env.TB_REDIRECT_USER;
  await pools.close();
  await Promise.all([a.close(), b.close(), tls?.close()]);
  rmSync(root, { recursive: true, force: true });
});

const AUTHS = {
  bearer: { type: 'bearer', tokenEnv: 'TB_REDIRECT_CANARY' },
  basic: { type: 'basic', userEnv: 'TB_REDIRECT_USER', passwordEnv: 'TB_REDIRECT_CANARY' },
  // Not a name that looks like a credential: it must go because it is the auth's header.
  header: { type: 'header', header: 'X-Tile-Key', valueEnv: 'TB_REDIRECT_CANARY' },
  query: { type: 'query', param: 'key', valueEnv: 'TB_REDIRECT_CANARY' },
} as const;

/** Whether a request carried the canary credential, in any header or in its URL. */
const leaked = (s: Seen) =>
  [CANARY, BASIC].some((c) => s.url.includes(c) || Object.values(s.headers).some((v) => String(v).includes(c)));

/** A batch driven with a fake breaker guard that records the outcome of every call. */
function batch(route: string, extra: Record<string, unknown> = {}) {
  const outcomes: CallOutcome['kind'][] = [];
  const guard = {
    acquire: (key: string): Promise<GuardDecision> =>
      Promise.resolve({ kind: 'proceed', key, state: 'closed', allowance: 1, failOpen: false }),
    release: (_d: GuardDecision, o: CallOutcome) => void outcomes.push(o.kind),
    abandon: () => {},
  };
  const source = parseSource({
    type: 'xyz',
    url: `${a.url}/${route}/{z}/{x}/{y}.png`,
    timeouts: { connectMs: 1_000, headersMs: 1_000, bodyMs: 1_000, totalMs: 3_000 },
    ...extra,
  });
  const input: FetchBatchInput = {
    sourceName: route.replace(/\W/g, '-'),
    source,
    tiles: [{ z: 5, x: 1, y: 2 }],
    storeRoot: root,
    retry: { attempts: 3, baseMs: 1, capMs: 5 },
  };
  return { run: () => makeFetchBatch({ pools, guard })(input), outcomes };
}

function counts() {
  return { a: a.seen.length, b: b.seen.length };
}

describe('redirects to another host, per auth type', () => {
  for (const [name, auth] of Object.entries(AUTHS)) {
    test(`${name}: refused by default as a configuration error; the other host sees no request`, async () => {
      const before = counts();
      const { run, outcomes } = batch('to-b', { auth });
      const [r] = await run();
      assert.deepEqual(
        [r!.status, r!.kind, r!.configError, r!.attempts, r!.httpStatus],
        ['failed', 'neutral', true, 1, 302],
        r!.reason,
      );
      assert.match(
        r!.reason,
        /^configuration error: redirect refused: http:\/\/127\.0\.0\.1:\d+\/to-b\/5\/1\/2\.png\S* -> http:\/\/127\.0\.0\.2:\d+\/tile\/5\/1\/2\.png\S*: to another host 127\.0\.0\.2:\d+ not in redirects\.allowHosts/,
      );
      assert.deepEqual(outcomes, ['neutral'], 'neutral for the breaker');
      assert.equal(b.seen.length, before.b, 'the other host got no request');
      assert.equal(a.seen.length, before.a + 1, 'not retried');
      assert.ok(leaked(a.seen.at(-1)!), 'the source itself got the credential');
      assert.ok(!JSON.stringify(r).includes(CANARY), r!.reason);
    });

    test(`${name}: followed to a listed host, without the credential`, async () => {
      const before = counts();
      const { run, outcomes } = batch('to-b', {
        auth,
        redirects: { allowHosts: [`127.0.0.2:${new URL(b.url).port}`] },
      });
      const [r] = await run();
      assert.equal(r!.status, 'ok', r!.reason);
      assert.deepEqual(outcomes, ['success']);
      assert.equal(b.seen.length, before.b + 1);
      const there = b.seen.at(-1)!;
      assert.match(there.url, /^\/tile\/5\/1\/2\.png/);
      assert.ok(!leaked(there), `the other host saw ${JSON.stringify(there)}`);
      assert.equal(there.headers['authorization'], undefined);
      assert.equal(there.headers['x-tile-key'], undefined);
      assert.ok(!/[?&]key=/.test(there.url), there.url);
    });

    test(`${name}: with sendCredentials the listed host gets the credential`, async () => {
      const { run } = batch('to-b', { auth, redirects: { allowHosts: ['127.0.0.2'], sendCredentials: true } });
      const [r] = await run();
      assert.equal(r!.status, 'ok', r!.reason);
      assert.ok(leaked(b.seen.at(-1)!), `the other host saw ${JSON.stringify(b.seen.at(-1))}`);
    });
  }

  test('credential-like source headers are stripped too; a Location with userinfo is masked in the reason', async () => {
    const allow = { allowHosts: ['127.0.0.2'] };
    const { run } = batch('to-b', { headers: { 'X-Api-Token': CANARY, 'X-Trace': 'keep' }, redirects: allow });
    assert.equal((await run())[0]!.status, 'ok');
    assert.equal(b.seen.at(-1)!.headers['x-api-token'], undefined);
    assert.equal(b.seen.at(-1)!.headers['x-trace'], 'keep');
    const before = counts();
    const [r] = await batch('to-b-userinfo', { auth: AUTHS.query }).run();
    assert.equal(r!.configError, true);
    assert.match(r!.reason, /-> http:\/\/\*\*\*@127\.0\.0\.2:\d+\/tile\/5\/1\/2\.png\?key=\*\*\*: to another host/);
    assert.ok(!r!.reason.includes(CANARY), r!.reason);
    assert.equal(b.seen.length, before.b);
  });
});

describe('redirects within the source', () => {
  for (const [name, auth] of Object.entries(AUTHS)) {
    test(`${name}: a relative same-origin redirect is followed with the credential`, async () => {
      const before = counts();
      const [r] = await batch('same', { auth }).run();
      assert.equal(r!.status, 'ok', r!.reason);
      assert.equal(a.seen.length, before.a + 2);
      const hop = a.seen.at(-1)!;
      assert.match(hop.url, /^\/tile\/5\/1\/2\.png/);
      // The query credential is put back where the Location dropped it.
      assert.ok(leaked(hop), `the second hop saw ${JSON.stringify(hop)}`);
    });
  }

  test("the exchange reports the last hop and the whole chain's latency", async () => {
    const x = await fetchUrl(`${a.url}/chain/2/5/1/2.png`, {
      dispatcher: pools.for(parseSource({ type: 'xyz', url: `${a.url}/{z}/{x}/{y}.png` })),
      headers: {},
    });
    assert.equal(x.error, undefined);
    assert.equal(x.status, 200);
    assert.equal(x.url, `${a.url}/tile/5/1/2.png`);
    assert.ok(x.latencyMs > 0);
  });
});

describe('loops and the hop limit are configuration errors', () => {
  test('A -> B -> A: failed, not retried, neutral for the breaker, the reason names the loop', async () => {
    const before = counts();
    const { run, outcomes } = batch('loop', { auth: AUTHS.query, redirects: { allowHosts: ['127.0.0.2'] } });
    const [r] = await run();
    assert.deepEqual([r!.status, r!.kind, r!.configError, r!.attempts], ['failed', 'neutral', true, 1], r!.reason);
    assert.match(
      r!.reason,
      /^configuration error: redirect loop: http:\/\/127\.0\.0\.1:\d+\/loop\/5\/1\/2\.png\?key=\*\*\* -> http:\/\/127\.0\.0\.2:\d+\/loop\/5\/1\/2\.png -> http:\/\/127\.0\.0\.1:\d+\/loop\/5\/1\/2\.png: \S+ visited twice/,
    );
    assert.ok(!r!.reason.includes(CANARY));
    assert.deepEqual(outcomes, ['neutral']);
    assert.deepEqual(counts(), { a: before.a + 1, b: before.b + 1 });
  });

  test('a loop within the source, with no redirects settings: the same', async () => {
    const self = batch('ping');
    const [s] = await self.run();
    assert.deepEqual([s!.status, s!.kind, s!.configError, s!.attempts], ['failed', 'neutral', true, 1], s!.reason);
    assert.match(
      s!.reason,
      /^configuration error: redirect loop: \S+\/ping\/5\/1\/2\.png -> \S+\/pong\/5\/1\/2\.png -> \S+\/ping\/5\/1\/2\.png: \S+ visited twice/,
    );
    assert.deepEqual(self.outcomes, ['neutral']);
  });

  test('more than maxRedirects: failed, not retried, neutral; within the limit it is fetched', async () => {
    const over = batch('chain/4');
    const [r] = await over.run();
    assert.deepEqual([r!.status, r!.kind, r!.configError, r!.attempts], ['failed', 'neutral', true, 1], r!.reason);
    assert.match(r!.reason, /^configuration error: redirect refused: more than 3 redirects \(maxRedirects\)/);
    assert.deepEqual(over.outcomes, ['neutral']);
    const two = batch('chain/4', { maxRedirects: 4 });
    assert.equal((await two.run())[0]!.status, 'ok');
    const none = batch('same', { maxRedirects: 0 });
    const [n] = await none.run();
    assert.deepEqual([n!.status, n!.configError], ['failed', true]);
    assert.match(n!.reason, /more than 0 redirects/);
  });
});

describe('https', () => {
  const agent = () => new Agent({ connect: { ca: cert!.cert } });

  test(
    'https -> http is refused even on the same host; the http side sees no request',
    { skip: cert === null && 'openssl is not available' },
    async () => {
      const dispatcher = agent();
      try {
        const before = counts();
        const x = await fetchUrl(`${tls!.url}/down/5/1/2.png`, {
          dispatcher,
          headers: { authorization: `Bearer ${CANARY}` },
        });
        assert.equal(x.error?.code, REDIRECT_REFUSED);
        const v = await classify(x, { width: 256, height: 256, blankIsFailure: false });
        assert.deepEqual([v.kind, v.configError], ['neutral', true]);
        assert.match(
          v.reason,
          /^redirect refused: https:\/\/127\.0\.0\.1:\d+\/down\/5\/1\/2\.png -> http:\/\/127\.0\.0\.1:\d+\/tile\/5\/1\/2\.png: from https to http$/,
        );
        assert.equal(a.seen.length, before.a);
      } finally {
        await dispatcher.close();
      }
    },
  );

  test(
    'an upgrade http -> https to another port is another origin: refused, or followed without the credential when listed',
    { skip: cert === null && 'openssl is not available' },
    async () => {
      const dispatcher = agent();
      try {
        const refused = await fetchUrl(`${a.url}/up/5/1/2.png`, {
          dispatcher,
          headers: { 'x-tile-key': CANARY },
          auth: AUTHS.header,
        });
        assert.equal(refused.error?.code, REDIRECT_REFUSED);
        assert.match(refused.error.message, /to another host 127\.0\.0\.1:\d+ not in redirects\.allowHosts/);
        const seen = tls!.seen.length;
        const port = new URL(tls!.url).port;
        const x = await fetchUrl(`${a.url}/up/5/1/2.png`, {
          dispatcher,
          headers: { 'x-tile-key': CANARY },
          auth: AUTHS.header,
          redirects: policy({ allowHosts: [`127.0.0.1:${port}`] }),
        });
        assert.equal(x.error, undefined, x.error?.message);
        assert.equal(x.url, `${tls!.url}/tile/5/1/2.png`);
        assert.equal(tls!.seen.length, seen + 1);
        assert.ok(!leaked(tls!.seen.at(-1)!));
      } finally {
        await dispatcher.close();
      }
    },
  );
});

describe('the probe', () => {
  test('follows its own origin and refuses another host', async () => {
    assert.equal((await probeEndpoint({ url: `${a.url}/same/0/0/0.png` })).outcome, 'success');
    const before = counts();
    const p = await probeEndpoint({ url: `${a.url}/to-b/0/0/0.png` });
    assert.equal(p.outcome, 'neutral');
    assert.match(p.reason, /not in redirects\.allowHosts/);
    assert.equal(b.seen.length, before.b);
  });
});
