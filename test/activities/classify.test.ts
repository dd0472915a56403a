import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { fetchUrl } from '../../src/activities/http/fetch-url';
import { classify, type Verdict } from '../../src/activities/validate/classify';
import { parseSource } from '../../src/sources/schema';
import { refusedPort, startFaultServer, type FaultServer } from '../helpers/fault-server';

let server: FaultServer;
const pools = new EndpointPools();
const source = parseSource({
  type: 'xyz',
  url: 'http://127.0.0.1:1/{z}/{x}/{y}.png',
  timeouts: { connectMs: 1_000, headersMs: 1_000, bodyMs: 1_000, totalMs: 2_000 },
  maxBytes: 1024 * 1024,
  maxRedirects: 0,
});

before(async () => {
  server = await startFaultServer();
});
after(async () => {
  await pools.close();
  await server.close();
});

async function verdict(path: string, blankIsFailure = false, base = server.url): Promise<Verdict> {
  const x = await fetchUrl(`${base}${path}`, {
    dispatcher: pools.for(source),
    headers: {},
    signal: AbortSignal.timeout(source.timeouts.totalMs),
  });
  return classify(x, { width: 256, height: 256, blankIsFailure });
}

describe('every row of the outcome classification, from a real server', () => {
  const rows: [string, string, RegExp, boolean?][] = [
    ['/ok/1/0/0.png', 'success', /png 256x256/],
    ['/ok-jpeg/1/0/0.jpg', 'success', /jpeg 256x256/],
    ['/blank/1/0/0.png', 'success', /uniform/],
    ['/status/503?retryAfter=7', 'transient', /HTTP 503/],
    ['/status/500', 'transient', /HTTP 500/],
    ['/se-500', 'transient', /HTTP 500: msDrawMap/],
    ['/status/408', 'transient', /HTTP 408/],
    ['/slow-drip', 'transient', /body cut off: (TimeoutError|AbortError|UND_ERR_ABORTED)/],
    ['/slow-headers', 'transient', /no response: UND_ERR_HEADERS_TIMEOUT/],
    ['/reset', 'transient', /body cut off/],
    ['/se-111', 'service-exception', /ServiceException: msDrawMap\(\): Image handling error/],
    ['/ows-exception', 'permanent', /TileOutOfRange: Row 99 is out of range/],
    ['/se-130-layer', 'permanent', /LayerNotDefined: msWMSLoadGetMapParams/],
    ['/html', 'service-exception', /HTML page instead of an image: "502 Bad Gateway"/],
    ['/empty', 'service-exception', /empty body/],
    ['/json', 'service-exception', /not an image \(json/],
    ['/truncated-png', 'service-exception', /undecodable image/],
    ['/truncated-jpeg', 'service-exception', /undecodable image/],
    ['/wrong-size', 'service-exception', /512x512, expected 256x256/],
    ['/oversize', 'service-exception', /larger than the source's maxBytes/],
    ['/status/400', 'permanent', /HTTP 400/],
    ['/status/422', 'permanent', /HTTP 422/],
    ['/status/404', 'neutral', /no tile there/],
    ['/status/204', 'neutral', /no tile there/],
    ['/status/401', 'neutral', /credentials/],
    ['/status/403', 'neutral', /credentials/],
    ['/status/429?retryAfter=3', 'rate-limited', /retry after 3000 ms/],
    ['/status/302', 'permanent', /redirect not followed/],
  ];
  for (const [path, kind, reason] of rows) {
    test(`${path} is ${kind}`, async () => {
      const v = await verdict(path);
      assert.equal(v.kind, kind, v.reason);
      assert.match(v.reason, reason);
    });
  }

  test('a blank tile is a service exception where blank is not expected', async () => {
    const v = await verdict('/blank/1/0/0.png', true);
    assert.equal(v.kind, 'service-exception');
    assert.match(v.reason, /blank tile/);
  });

  test('Retry-After is carried for 429 and 503', async () => {
    assert.equal((await verdict('/status/429?retryAfter=3')).retryAfterMs, 3_000);
    assert.equal((await verdict('/status/503?retryAfter=7')).retryAfterMs, 7_000);
  });

  test('401/403 are flagged as configuration errors, not endpoint health', async () => {
    assert.equal((await verdict('/status/401')).configError, true);
  });

  test('a refused connection is transient', async () => {
    const v = await verdict('/ok/1/0/0.png', false, `http://127.0.0.1:${await refusedPort()}`);
    assert.equal(v.kind, 'transient');
    assert.match(v.reason, /no response: ECONNREFUSED/);
  });

  test('an error drawn into an image (se_inimage) cannot be told from a tile: requests ask for XML exceptions instead', async () => {
    const v = await verdict('/inimage');
    assert.equal(v.kind, 'success');
  });
});
