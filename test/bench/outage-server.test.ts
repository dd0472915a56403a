import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import { now } from '../../bench/outage/clock';
import { OutageTileServer } from '../../bench/outage/server';
import { makeTilePng } from '../../bench/outage/tile';

/** GETs a tile; resolves with its status, or 'dropped' when the connection closes without an answer. */
function get(port: number, path: string): Promise<number | 'dropped'> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve('dropped'));
    req.end();
  });
}

test("bench:outage's hang: a render already under way when the hang starts answers at its render time; calls sent during the hang wait until it ends", async () => {
  const server = new OutageTileServer({ tile: await makeTilePng(), tileLatencyMs: 600 });
  const port = await server.listen();
  try {
    // Renders take 300-900 ms; the hang starts 100 ms in and lasts 2 s.
    const schedule = server.start({
      healthyMs: 100,
      outageMs: 2_000,
      recoveryMs: 1_000,
      kind: 'hang',
      retryAfterSec: null,
    });
    const rendering = get(port, '/1/0/0.png');
    await new Promise((r) => setTimeout(r, 250));
    const hung = get(port, '/1/1/0.png');
    assert.equal(await rendering, 200, 'the call in flight at the hang is answered: the slow successes still land');
    const [arrived, answered] = server.stats().requests[0]!;
    assert.ok(arrived < schedule.outageAt && answered > schedule.outageAt, 'answered after the hang began');
    assert.equal(await hung, 'dropped', 'a call sent during the hang is held, then dropped as it ends');
    assert.ok(now() >= server.stats().schedule.recoverAt, 'not before the hang ended');
  } finally {
    await server.close();
  }
});
