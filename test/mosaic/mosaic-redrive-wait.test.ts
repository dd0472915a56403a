import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { adminBreaker } from '../../src/client/breakers';
import { startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { transitionsQuery } from '../../src/messages/breaker';
import { progressQuery } from '../../src/messages/mosaic';
import type { MosaicProgress, MosaicRequest } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest, type Manifest, demoRequest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

/*
 * `mosaic redrive` after an outage, through the CLI, against a real HTTP tile server whose outage the test
 * ends: the re-drive waits for the breaker (the `wait` fallback with --wait-for as its deadline), says what it
 * waits for, and either recovers every dead letter in one run or ends at its deadline having sent the server
 * nothing but the breaker's probes.
 */

const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-redrive-wait-'));
const taskQueue = uniqueTaskQueue('redrive-wait');
// Quick to trip and to cool down (1 s, at most 2 s before jitter), so a few seconds show several cycles.
const BREAKER = { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 } };
// A second worker whose entities never probe by themselves: only the mosaic's own tiles test the server.
const quietQueue = uniqueTaskQueue('redrive-wait-quiet');
let env: TestWorkflowEnvironment;
let worker: Worker;
let quiet: Worker;
let running: Promise<void>;
let runningQuiet: Promise<void>;
const servers: DemoTileServer[] = [];

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    breaker: BREAKER,
    roots: TEST_ROOTS,
  });
  running = worker.run();
  quiet = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue: quietQueue,
    breaker: { ...BREAKER, entityOptions: { selfProbeDelayMs: 3_600_000 } },
    roots: TEST_ROOTS,
  });
  runningQuiet = quiet.run();
});
after(async () => {
  worker?.shutdown();
  quiet?.shutdown();
  await running;
  await runningQuiet;
  await env?.teardown();
  for (const s of servers) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, TEMPORAL_ADDRESS: env.address, TILEBREAKER_TASK_QUEUE: taskQueue }, timeout: 180_000 },
      (err, out, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

/** A tile server that goes down after 40 requests and stays down until the test ends the outage. */
function outageServer(): Promise<DemoTileServer> {
  return startDemoTileServer({ latencyMs: 5, outageAfterRequests: 40, outageMs: 10 * 60_000 }).then((s) => {
    servers.push(s);
    return s;
  });
}

const request = (s: DemoTileServer, name: string, extra: Partial<MosaicRequest> = {}): MosaicRequest =>
  demoRequest(s, dir, name, extra);

/** A fail-fast mosaic of 130 tiles through that outage: its manifest, with dead letters and the breaker tripped. */
async function mosaicThroughOutage(name: string): Promise<{ s: DemoTileServer; manifest: string; m: Manifest }> {
  const s = await outageServer();
  const req = request(s, name, { fallback: 'fail-fast' });
  const result = await (await startMosaic(env.client, taskQueue, req, `mosaic-${name}-${process.pid}`)).result();
  const m = readManifest(result);
  assert.equal(assertAccounted(m), null);
  assert.ok(m.counts['dead-lettered'] > 0 && s.isDown(), `the outage left dead letters: ${JSON.stringify(m.counts)}`);
  return { s, manifest: result.manifest, m };
}

/** The re-drive's progress, or null before it has started. */
const progressOf = (id: string): Promise<MosaicProgress | null> =>
  env.client.workflow
    .getHandle(id)
    .query(progressQuery)
    .catch(() => null);

/** The timers the workflow started, in ms. */
async function timersOf(id: string): Promise<number[]> {
  const history = await env.client.workflow.getHandle(id).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const t = e.timerStartedEventAttributes?.startToFireTimeout;
    return t ? [Number(t.seconds ?? 0) * 1000 + Math.round((t.nanos ?? 0) / 1e6)] : [];
  });
}

const WAITING_LINE =
  /waiting for breaker (\S+) \((open|half-open)\): next try in \d+ s; gives up at (\d{4}-\d\d-\d\dT[\d:.]+Z)/;

test('a re-drive started while the breaker is open waits for it: the server comes back during the wait and ONE run recovers every dead letter (exit 0)', async (t) => {
  const { s, manifest, m } = await mosaicThroughOutage('recovers');
  const key = breakerKey(s.url);
  const dead = m.counts['dead-lettered'];
  const id = `redrive-recovers-${process.pid}`;
  const before = s.stats.requests;
  const run = cli(['mosaic', 'redrive', manifest, '--id', id, '--wait-for', '2m']);

  // Wait until the re-drive says it waits for the breaker; the server is still down then.
  let waiting: MosaicProgress['waitingFor'] = null;
  for (let k = 0; k < 300 && !waiting; k++) {
    waiting = (await progressOf(id))?.waitingFor ?? null;
    if (!waiting) await delay(100);
  }
  assert.ok(waiting, 'progress.waitingFor was seen while the re-drive waited');
  assert.equal(waiting.key, key);
  assert.ok(
    waiting.state === 'open' || waiting.state === 'half-open',
    `it waits on a refusing breaker: ${waiting.state}`,
  );
  assert.ok(s.isDown());
  const whileDown = s.stats.requests - before;
  const cameBack = Date.now();
  s.setDown(false);

  let fetchedAt: number | null = null;
  for (let k = 0; k < 600 && fetchedAt === null; k++) {
    const p = await progressOf(id);
    if (p && (p.phase === 'assembling' || p.phase === 'done')) fetchedAt = Date.now();
    else await delay(100);
  }
  const r = await run;
  assert.equal(r.code, 0, r.err);
  const m2 = readManifest({ manifest });
  assert.equal(assertAccounted(m2), null);
  assert.equal(m2.counts.ok, 130, JSON.stringify(m2.counts));
  assert.equal(m2.tiles.filter((t) => t.pass > 0).length, dead, 'every dead letter was fetched by this one re-drive');
  const line = WAITING_LINE.exec(r.err);
  assert.ok(line, `the watch output says what it waits for: ${r.err}`);
  assert.equal(line[1], key);
  const requests = s.stats.requests - before;
  // The dead letters once each, and the probes (tiles, or the entity's own) that found the server down.
  assert.ok(
    requests <= dead + whileDown + 3,
    `requests ${requests} for ${dead} dead letters (${whileDown} while down)`,
  );
  t.diagnostic(
    `figures: recovered ${dead} dead letters in one re-drive; fetched ${((fetchedAt! - cameBack) / 1000).toFixed(1)} s after the server came back; the server got ${requests} requests (${whileDown} while down)`,
  );
});

test('a re-drive with a short --wait-for against a server that stays down ends at the deadline with exit 3, having sent only the breaker probes', async (t) => {
  const { s, manifest, m } = await mosaicThroughOutage('stays-down');
  const dead = m.counts['dead-lettered'];
  const id = `redrive-stays-down-${process.pid}`;
  const before = s.stats.requests;
  const startedAt = Date.now();
  const r = await cli(['mosaic', 'redrive', manifest, '--id', id, '--wait-for', '10s']);
  const took = Date.now() - startedAt;
  assert.equal(r.code, 3, r.err);
  assert.ok(took >= 10_000, `it waited until its deadline (${took} ms)`);
  assert.match(r.err, WAITING_LINE);
  const m2 = readManifest({ manifest });
  assert.equal(assertAccounted(m2), null);
  assert.equal(m2.counts.ok + m2.counts['dead-lettered'], 130);
  assert.equal(m2.counts['dead-lettered'], dead, 'every dead letter is dead-lettered again');

  // Every request the server got was a probe that failed: the breaker went from half-open back to open.
  const transitions = await env.client.workflow.getHandle(breakerWorkflowId(breakerKey(s.url))).query(transitionsQuery);
  const failedProbes = transitions.filter((t) => t.at >= startedAt && t.from === 'half-open' && t.to === 'open').length;
  const requests = s.stats.requests - before;
  assert.ok(requests <= failedProbes + 1, `requests ${requests}, failed probes ${failedProbes}`);
  // The waits followed the breaker's retryAfter (cooldown at most 2 s with jitter, 1 s while half-open), not a
  // backoff grown to 5 s and more after futile passes.
  const timers = await timersOf(id);
  assert.ok(timers.length >= 3, `several waits: ${timers.join(', ')}`);
  assert.ok(Math.max(...timers) <= 3_000, `every wait follows the breaker's retryAfter: ${timers.join(', ')} ms`);
  t.diagnostic(
    `figures: ${requests} requests in ${(took / 1000).toFixed(1)} s against ${failedProbes} failed probes; ${timers.length} waits of ${timers.join(', ')} ms`,
  );
});

test("an ordinary mosaic under wait says what it waits for, and with a 1 s cooldown and no entity self-probe picks up within the breaker's retryAfter of the server's recovery, not a grown backoff", async (t) => {
  const s = await outageServer();
  const key = breakerKey(s.url);
  const handle = await startMosaic(
    env.client,
    quietQueue,
    request(s, 'wait-quiet', { fallback: 'wait', deadline: '5m' }),
    `mosaic-wait-quiet-${process.pid}`,
  );
  let waiting: MosaicProgress['waitingFor'] = null;
  for (let k = 0; k < 300 && !waiting; k++) {
    waiting = (await progressOf(handle.workflowId))?.waitingFor ?? null;
    if (!waiting) await delay(100);
  }
  assert.ok(waiting, 'progress.waitingFor was seen while the mosaic waited');
  assert.equal(waiting.key, key);
  assert.ok(waiting.deadlineAt !== null && waiting.deadlineAt > Date.now());
  // Down long enough for several futile passes: the old backoff had grown to 10 s by then.
  await delay(8_000);
  const okBefore = s.stats.ok;
  const cameBack = Date.now();
  s.setDown(false);
  while (s.stats.ok === okBefore) await delay(50);
  const pickup = Date.now() - cameBack;
  const result = await handle.result();
  assert.equal(result.counts.ok, 130, JSON.stringify(result.counts));
  const timers = await timersOf(handle.workflowId);
  assert.ok(timers.length >= 4, `several waits: ${timers.join(', ')}`);
  assert.ok(Math.max(...timers) <= 3_000, `every wait follows the breaker's retryAfter: ${timers.join(', ')} ms`);
  t.diagnostic(
    `figures: picked up ${(pickup / 1000).toFixed(1)} s after the server came back; waits ${timers.join(', ')} ms`,
  );
});

test('a maintenance window ended early: breaker reset wakes a mosaic waiting on a forced-open breaker within seconds, not at the end of its wait', async (t) => {
  const s = await startDemoTileServer({ latencyMs: 5 });
  servers.push(s);
  const key = breakerKey(s.url);
  // Opened ahead of the window, for ten minutes: the mosaic's wait is as long as its deadline allows.
  const opened = await adminBreaker(env.client, key, 'force-open', {
    durationMs: 600_000,
    reason: 'renderer upgrade',
    actor: 'test:ops',
    taskQueue,
  });
  assert.equal(opened.status.view.state, 'forced-open');
  const handle = await startMosaic(
    env.client,
    taskQueue,
    request(s, 'wait-window', { fallback: 'wait', deadline: '5m' }),
    `mosaic-wait-window-${process.pid}`,
  );
  let waiting: MosaicProgress['waitingFor'] = null;
  for (let k = 0; k < 300 && waiting?.state !== 'forced-open'; k++) {
    waiting = (await progressOf(handle.workflowId))?.waitingFor ?? null;
    if (waiting?.state !== 'forced-open') await delay(100);
  }
  assert.equal(waiting?.state, 'forced-open');
  await delay(1_000);
  assert.equal(s.stats.requests, 0, 'nothing reached the server while the breaker was forced open');
  const resetAt = Date.now();
  await adminBreaker(env.client, key, 'reset', { reason: 'window over early', actor: 'test:ops' });
  while (s.stats.ok === 0 && Date.now() - resetAt < 60_000) await delay(50);
  const resumed = Date.now() - resetAt;
  assert.ok(resumed < 10_000, `traffic resumed ${resumed} ms after the reset`);
  const result = await handle.result();
  assert.equal(result.counts.ok, 130, JSON.stringify(result.counts));
  t.diagnostic(`figures: traffic resumed ${(resumed / 1000).toFixed(1)} s after the reset`);
});
