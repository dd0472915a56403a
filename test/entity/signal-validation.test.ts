import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { adminBreaker, configureBreaker, listBreakers, type ListResult } from '../../src/client/breakers';
import { createWorker } from '../../src/client/worker';
import { formatList } from '../../src/cli/breaker/format';
import { parseForceOpenFor } from '../../src/cli/breaker/options';
import {
  adminSignal,
  cancelProbeSignal,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  statusQuery,
  type BreakerStatus,
} from '../../src/messages/breaker';
import { checkAdminAction, checkSignal, MAX_COUNT, reportSchema } from '../../src/messages/breaker-validation';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { startEntity, type EntityHandle } from '../helpers/entity';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const run = promisify(execFile);
const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('signal-validation');
const tag = `${process.pid}-${Date.now()}`;
const key = `http://victim-${tag}.example.test:80`;
let h: EntityHandle;

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: env.namespace ?? 'default',
    taskQueue,
  });
  running = worker.run();
  h = await startEntity(env.client, taskQueue, { key }, { reporter: 'w1', counts: { success: 5, transient: 1 } });
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

async function cliRun(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const childEnv = { ...process.env, TEMPORAL_ADDRESS: env.address, TEMPORAL_NAMESPACE: env.namespace ?? 'default' };
  try {
    const { stdout, stderr } = await run(process.execPath, [cli, ...args], { env: childEnv, timeout: 60_000 });
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

/** What a refused signal must leave as it was: everything but the refusal counter and the clock. */
function unchanged(s: BreakerStatus) {
  const { refusedSignals: _r, ...counters } = s.counters;
  return {
    view: s.view,
    figures: s.figures,
    config: s.config,
    probe: s.probe,
    probes: s.probes,
    consecutiveOpens: s.consecutiveOpens,
    counters,
    lastReportAt: s.lastReportAt,
  };
}

// Straight by signal, as anyone who may signal the entity could: no client check stands in the way.
const bad: [string, (h: EntityHandle) => Promise<void>][] = [
  ['force-open for 1e308 ms', (h) => h.signal(adminSignal, { action: 'force-open', durationMs: 1e308, actor: 'x' })],
  ['force-open for 31 days', (h) => h.signal(adminSignal, { action: 'force-open', durationMs: 31 * 86_400_000 })],
  ['force-open for -5 ms', (h) => h.signal(adminSignal, { action: 'force-open', durationMs: -5 })],
  ['force-open for "soon"', (h) => h.signal(adminSignal, { action: 'force-open', durationMs: 'soon' as never })],
  ['a negative count', (h) => h.signal(reportSignal, { reporter: 'evil', counts: { transient: -5 } })],
  [
    'a string count',
    (h) => h.signal(reportSignal, { reporter: 'evil', counts: { transient: '9' as never, success: '00' as never } }),
  ],
  ['a count of 1e30', (h) => h.signal(reportSignal, { reporter: 'evil', counts: { success: 1e30 } })],
  ['a fractional count', (h) => h.signal(reportSignal, { reporter: 'evil', counts: { transient: 2.5 } })],
  ['no counts at all', (h) => h.signal(reportSignal, { reporter: 'evil' } as never)],
  [
    'a latency histogram with a negative bucket',
    (h) => h.signal(reportSignal, { reporter: 'evil', counts: { success: 1 }, latency: [-1, 3] }),
  ],
  [
    'a latency histogram far too long',
    (h) =>
      h.signal(reportSignal, { reporter: 'evil', counts: { success: 1 }, latency: new Array<number>(5_000).fill(1) }),
  ],
  [
    'a rate-limit pause of 1e308 ms',
    (h) => h.signal(reportSignal, { reporter: 'evil', counts: { 'rate-limited': 1 }, rateLimitedForMs: 1e308 }),
  ],
  ['an inFlight of -3', (h) => h.signal(reportSignal, { reporter: 'evil', counts: { success: 1 }, inFlight: -3 })],
  ['a report that is a string', (h) => h.signal(reportSignal, 'hello' as never)],
  [
    'a witness of 10,000 characters',
    (h) => h.signal(reportSignal, { reporter: 'evil', counts: { transient: 1 }, witness: 'x'.repeat(10_000) }),
  ],
  ['a file:// probe', (h) => h.signal(adminSignal, { action: 'set-probe', probe: { url: 'file:///etc/passwd' } })],
  [
    'a probe with a password in its URL',
    (h) =>
      h.signal(adminSignal, {
        action: 'set-probe',
        probe: { url: 'https://user:secret@tiles.example.test/0/0/0.png' },
      }),
  ],
  [
    'a probe sending an Authorization header',
    (h) =>
      h.signal(adminSignal, {
        action: 'set-probe',
        probe: { url: 'https://tiles.example.test/0/0/0.png', headers: { Authorization: 'Bearer x' } },
      }),
  ],
  [
    'a configure whose config is a string',
    (h) => h.signal(adminSignal, { action: 'configure', config: 'everything' as never }),
  ],
  [
    'a configure the policy cannot run',
    (h) => h.signal(adminSignal, { action: 'configure', config: { cooldownMs: -1 } }),
  ],
  [
    'a configure past its bounds (a cooldown of 1e15 ms)',
    (h) => h.signal(adminSignal, { action: 'configure', config: { cooldownMs: 1e15 } }),
  ],
  [
    'a configure whose cooldown grows past 30 days',
    (h) => h.signal(adminSignal, { action: 'configure', config: { cooldownMs: 86_400_000, cooldownMaxFactor: 100 } }),
  ],
  ['an unknown admin action', (h) => h.signal(adminSignal, { action: 'explode' } as never)],
  ['a reason of 10,000 characters', (h) => h.signal(adminSignal, { action: 'reset', reason: 'x'.repeat(10_000) })],
  ['a probe result of generation -1', (h) => h.signal(probeResultSignal, { generation: -1, outcome: 'success' })],
  [
    'a probe result with an unknown outcome',
    (h) => h.signal(probeResultSignal, { generation: 1, outcome: 'great' as never }),
  ],
  [
    'a probe result with a latency of 1e308',
    (h) => h.signal(probeResultSignal, { generation: 1, outcome: 'success', latencyMs: 1e308 }),
  ],
  [
    'a probe request with a numeric id',
    (h) => h.signal(requestProbeSignal, { requestId: 42 as never, requester: 'x' }),
  ],
  ['a cancel with no id', (h) => h.signal(cancelProbeSignal, {} as never)],
];

test('bad payloads sent straight by signal are refused whole, counted, and change nothing', async () => {
  const before = await h.query(statusQuery);
  assert.equal(before.view.state, 'closed');
  assert.equal(before.counters.refusedSignals ?? 0, 0);
  for (const [, send] of bad) await send(h);
  let after = await h.query(statusQuery);
  for (let i = 0; i < 50 && (after.counters.refusedSignals ?? 0) < bad.length; i++) {
    await delay(100);
    after = await h.query(statusQuery);
  }
  assert.equal(after.counters.refusedSignals, bad.length, 'every bad signal counted once');
  assert.deepEqual(unchanged(after), unchanged(before), 'nothing applied');
  assert.equal((await h.describe()).status.name, 'RUNNING');

  // A good signal after them still works.
  await h.signal(reportSignal, { reporter: 'w2', counts: { success: 3 }, somethingNewer: true } as never);
  const good = await h.query(statusQuery);
  assert.equal(
    good.figures.successes,
    before.figures.successes + 3,
    'an unknown field is dropped, not a reason to refuse',
  );
  assert.equal(good.counters.refusedSignals, bad.length);
});

test('breaker list and breaker show still work, and show counts the refusals', async () => {
  let listed = await cliRun(['breaker', 'list']);
  for (let i = 0; i < 50 && !listed.out.includes(key); i++) {
    await delay(200);
    listed = await cliRun(['breaker', 'list']);
  }
  assert.equal(listed.code, 0, listed.err);
  assert.ok(listed.out.includes(key), listed.out);
  const shown = await cliRun(['breaker', 'show', key]);
  assert.equal(shown.code, 0, shown.err);
  assert.match(shown.out, new RegExp(`${bad.length} refused signals`));
  assert.match(shown.out, /state {8}closed/);
});

test('the client and the CLI refuse the same values before sending, naming the field and the value', async () => {
  await assert.rejects(
    adminBreaker(env.client, key, 'force-open', { durationMs: 1e308 }),
    /durationMs must be a whole number of ms from 1 to 2592000000 \(30 days\) \(got 1e\+308\)/,
  );
  assert.throws(
    () => checkAdminAction({ action: 'set-probe', probe: { url: 'file:///etc/passwd' } }),
    /probe\.url: must be an http:\/\/ or https:\/\/ URL \(got "file:\/\/\/etc\/passwd"\)/,
  );
  assert.throws(
    () => checkAdminAction({ action: 'force-open', reason: 'r', durationMs: 1e308 }),
    /durationMs: .*\(got 1e\+308\)/,
  );
  const c = checkSignal('report', { reporter: 'w', counts: { transient: -5 } });
  assert.ok(!c.ok && /counts\.transient: .*\(got -5\)/.test(c.problem), JSON.stringify(c));
  assert.throws(() => parseForceOpenFor('40d'), /--for must be at most 30d \(got "40d"\)/);
  assert.equal(parseForceOpenFor('30d'), 30 * 86_400_000);
  const cliOpen = await cliRun(['breaker', 'open', key, '--for', '365d']);
  assert.notEqual(cliOpen.code, 0);
  assert.match(cliOpen.err, /--for must be at most 30d \(got "365d"\)/);
  assert.equal((await h.query(statusQuery)).view.state, 'closed', 'nothing was sent');
});

test('configure bounds refused: the CLI exits 2 naming the field, the value and the bound, and sends nothing', async () => {
  const before = await h.query(statusQuery);
  const text = await cliRun(['breaker', 'configure', key, 'cooldownMs=1000000000000000']);
  assert.equal(text.code, 2, text.err);
  assert.match(text.err, /cooldownMs: must be at most 2592000000 \(30 days\) \(got 1000000000000000\)/);
  assert.doesNotMatch(text.out, /done/);
  const json = await cliRun(['breaker', 'configure', key, 'cooldownMultiplier=1000000', '--json']);
  assert.equal(json.code, 2, json.err);
  const { error } = JSON.parse(json.out) as {
    error: { kind: string; field: string; exitCode: number; issues: string[] };
  };
  assert.deepEqual([error.kind, error.field, error.exitCode], ['invalid', 'cooldownMultiplier', 2]);
  assert.deepEqual(error.issues, ['cooldownMultiplier: must be at most 100 (100) (got 1000000)']);
  // Within each bound alone, past 30 days once grown: refused against the configuration in force (the client).
  const grown = await cliRun(['breaker', 'configure', key, 'cooldownMs=864000000']);
  assert.equal(grown.code, 2, grown.err);
  assert.match(grown.err, /cooldownMs: x cooldownMaxFactor \(8\) must be at most 2592000000 \(30 days\)/);
  await assert.rejects(
    configureBreaker(env.client, key, { probeLeaseMs: 1e12 }),
    /probeLeaseMs: must be at most 3600000 \(1 h\) \(got 1000000000000\)/,
  );
  const after = await h.query(statusQuery);
  assert.deepEqual(after.config, before.config, 'nothing was sent');
  assert.equal(after.counters.refusedSignals, before.counters.refusedSignals, 'nothing reached the entity');
});

test('a restarted reporter does not make a quorum on a real entity: reports carry the witness through to the policy', async () => {
  const qkey = `http://quorum-${tag}.example.test:80`;
  const q = await startEntity(
    env.client,
    taskQueue,
    { key: qkey },
    { reporter: 'worker-1@b-0001', witness: 'host:b', counts: { success: 10 } },
  );
  const reportsSeen = async (n: number): Promise<BreakerStatus> => {
    let s = await q.query(statusQuery);
    for (let i = 0; i < 100 && s.counters.reports < n; i++) {
      await delay(100);
      s = await q.query(statusQuery);
    }
    assert.equal(s.counters.reports, n);
    return s;
  };
  // Host a's worker fails, restarts under a new process id, and fails again: one witness.
  await q.signal(reportSignal, { reporter: 'worker-1@a-aaaa', witness: 'host:a', counts: { transient: 40 } });
  await q.signal(reportSignal, { reporter: 'worker-1@a-bbbb', witness: 'host:a', counts: { transient: 40 } });
  const declined = await reportsSeen(3);
  assert.equal(declined.view.state, 'closed');
  assert.equal(declined.config.quorum, 2);
  assert.ok((declined.counters.quorumDeclined ?? 0) >= 1, JSON.stringify(declined.counters));
  // A second failing host meets it.
  await q.signal(reportSignal, { reporter: 'worker-1@c-cccc', witness: 'host:c', counts: { transient: 40 } });
  const opened = await reportsSeen(4);
  assert.equal(opened.view.state, 'open');
});

test('breaker list --state open includes forced-open breakers (and --state forced-open lists them alone)', async () => {
  const forcedKey = `http://forced-${tag}.example.test:80`;
  const opened = await adminBreaker(env.client, forcedKey, 'force-open', { taskQueue, reason: 'maintenance' });
  assert.equal(opened.status.view.state, 'forced-open');
  // Visibility follows the entity's search attributes after a moment: wait for the listing, not a fixed time.
  const listed = async (state: string) => {
    let r = await listBreakers(env.client, { state });
    for (let i = 0; i < 100 && !r.breakers.some((b) => b.key === forcedKey); i++) {
      await delay(200);
      r = await listBreakers(env.client, { state });
    }
    return r;
  };
  const open = await listed('open');
  assert.equal(open.filteredBy, 'search-attribute');
  assert.deepEqual(
    open.breakers.filter((b) => b.key === forcedKey).map((b) => b.state),
    ['forced-open'],
  );
  const forced = await listed('forced-open');
  assert.ok(forced.breakers.every((b) => b.state === 'forced-open'));
  assert.ok(forced.breakers.some((b) => b.key === forcedKey));
  const cli = await cliRun(['breaker', 'list', '--state', 'open', '--json']);
  assert.equal(cli.code, 0, cli.err);
  assert.ok(cli.out.includes(forcedKey), cli.out);
});

test('a bad time stored before the checks prints as such instead of failing the listing', () => {
  // Any instant: the formatter is given it, nothing reads the machine's clock.
  const now = Date.UTC(2001, 5, 7);
  const view = {
    state: 'forced-open',
    mode: 'forced-open',
    phase: 'open',
    cooldownUntil: null,
    forcedUntil: now + 1e308,
    rampStartedAt: null,
    rampMs: 0,
    rampFloor: 0,
    probesOutstanding: 0,
    maxConcurrentProbes: 1,
    generation: 0,
  } as const;
  const list: ListResult = {
    breakers: [
      {
        key: 'http://a.example.test:80',
        workflowId: 'breaker/a',
        runId: 'r',
        state: 'forced-open',
        stateFrom: 'search-attribute',
        view,
        startTime: new Date(now),
        taskQueue: 'q',
      },
      {
        key: 'http://b.example.test:80',
        workflowId: 'breaker/b',
        runId: 'r',
        state: 'closed',
        stateFrom: 'search-attribute',
        view: { ...view, state: 'closed', mode: 'auto', phase: 'closed', forcedUntil: null },
        startTime: new Date(now),
        taskQueue: 'q',
      },
    ],
    query: '',
    filteredBy: null,
  };
  const text = formatList(list, undefined, now);
  assert.match(text, /http:\/\/a\.example\.test:80 +forced open until \(invalid time: 1e\+308\)/);
  assert.match(text, /http:\/\/b\.example\.test:80/);
});

test("a report's self-probe is adopted by an entity with none, never over an operator's choice", async () => {
  const k = `http://adopt-${tag}.example.test:80`;
  const e = await startEntity(env.client, taskQueue, { key: k }, { reporter: 'w1', counts: { success: 1 } });
  assert.equal((await e.query(statusQuery)).probe, null);
  await e.signal(reportSignal, { reporter: 'w1', counts: { success: 1 }, probe: { url: `${k}/1/2/3.png` } });
  assert.equal((await e.query(statusQuery)).probe?.url, `${k}/1/2/3.png`);
  await e.signal(reportSignal, { reporter: 'w2', counts: { success: 1 }, probe: { url: `${k}/4/5/6.png` } });
  assert.equal((await e.query(statusQuery)).probe?.url, `${k}/1/2/3.png`, 'the first one stays');
  // An operator clears it: a worker's report does not bring one back.
  await e.signal(adminSignal, { action: 'set-probe', probe: null });
  await e.signal(reportSignal, { reporter: 'w3', counts: { success: 1 }, probe: { url: `${k}/7/8/9.png` } });
  const s = await e.query(statusQuery);
  assert.equal(s.probe, null);
  // A report whose probe is a file:// URL is refused whole, its counts with it.
  await e.signal(reportSignal, { reporter: 'w4', counts: { success: 7 }, probe: { url: 'file:///etc/passwd' } });
  const after = await e.query(statusQuery);
  assert.equal(after.counters.refusedSignals, 1);
  assert.equal(after.figures.successes, s.figures.successes);
});

test("the reports' fast check accepts exactly what the schema accepts", () => {
  const lat = (n: number, v = 1) => new Array<number>(n).fill(v);
  const reports: unknown[] = [
    { reporter: 'w', counts: {} },
    {
      reporter: 'w',
      counts: { success: 3, transient: 1, 'rate-limited': 2 },
      latency: lat(52),
      generation: 4,
      inFlight: 8,
      stalled: 1,
      retryAfterMs: 0,
      rateLimitedForMs: 2_000,
    },
    { reporter: 'w', counts: { success: MAX_COUNT } },
    { reporter: 'w', counts: { success: MAX_COUNT + 1 } },
    { reporter: 'w', counts: { success: -1 } },
    { reporter: 'w', counts: { success: 1.5 } },
    { reporter: 'w', counts: { success: '1' } },
    { reporter: 'w', counts: { nonsense: 1 } },
    { reporter: 'w', counts: [] },
    { reporter: 'w', counts: { success: 1 }, latency: lat(53) },
    { reporter: 'w', counts: { success: 1 }, latency: [0, -1] },
    { reporter: 'w', counts: { success: 1 }, latency: 'x' },
    { reporter: 'w', counts: { success: 1 }, generation: -1 },
    { reporter: 'w', counts: { success: 1 }, generation: 1.5 },
    { reporter: 'w', counts: { success: 1 }, inFlight: 100_001 },
    { reporter: 'w', counts: { success: 1 }, retryAfterMs: 31 * 86_400_000 },
    { reporter: 'w', counts: { success: 1 }, rateLimitedForMs: -1 },
    { reporter: 'w', counts: { success: 1 }, probe: { url: 'https://t.example.test/1/2/3.png' } },
    { reporter: 'w', counts: { success: 1 }, probe: { url: 'file:///etc/passwd' } },
    { reporter: 'w', counts: { success: 1 }, newerField: 1 },
    // A spaced report: its older outcomes' span and how often its sender reports.
    {
      reporter: 'w',
      counts: { success: 40, transient: 1 },
      earlier: { counts: { success: 38 }, latency: lat(52, 0), fromAgoMs: 8_000, toAgoMs: 1_000 },
      everyMs: 8_000,
    },
    { reporter: 'w', counts: { success: 4 }, earlier: { counts: { success: 3 }, fromAgoMs: 3_600_001, toAgoMs: 0 } },
    { reporter: 'w', counts: { success: 4 }, earlier: { counts: { success: -3 }, fromAgoMs: 2_000, toAgoMs: 0 } },
    { reporter: 'w', counts: { success: 4 }, earlier: { counts: { success: 3 }, fromAgoMs: 2_000 } },
    {
      reporter: 'w',
      counts: { success: 4 },
      earlier: { counts: { success: 3 }, fromAgoMs: 2_000, toAgoMs: 0, extra: 1 },
    },
    { reporter: 'w', counts: { success: 4 }, everyMs: 600_001 },
    { reporter: 'w', counts: { success: 4 }, everyMs: 1.5 },
    { reporter: 'x'.repeat(257), counts: {} },
    // The quorum's witness: a host-level name, bounded as a reporter's.
    { reporter: 'w', counts: { transient: 2 }, witness: 'host:node-3' },
    { reporter: 'w', counts: { transient: 2 }, witness: 'x'.repeat(257) },
    { reporter: 'w', counts: { transient: 2 }, witness: 7 },
    { reporter: 3, counts: {} },
    { counts: {} },
    null,
    [],
    'report',
  ];
  for (const r of reports)
    assert.equal(checkSignal('report', r).ok, reportSchema.safeParse(r).success, JSON.stringify(r));
  assert.equal(
    checkSignal('report', { reporter: 'w', counts: {}, witness: 'host:node-3' }).ok,
    true,
    'a witness is accepted',
  );
  assert.equal(
    checkSignal('report', { reporter: 'w', counts: {}, witness: 'x'.repeat(257) }).ok,
    false,
    'a witness is bounded',
  );
});
