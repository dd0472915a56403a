import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { isCanonicalKey, namedBreakerKey, type TransitionRecord } from '../../src/breaker';
import {
  adminBreaker,
  AdminNotConfirmedError,
  BreakerNotFoundError,
  BreakerNotRunningError,
  breakerStatus,
  configureBreaker,
  listBreakers,
  resolveBreakerKey,
  showBreaker,
  type AdminResult,
  type ListedBreaker,
} from '../../src/client/breakers';
import { createWorker } from '../../src/client/worker';
import { EXIT_SENT_NOT_CONFIRMED } from '../../src/cli/breaker/confirm';
import { parseDuration } from '../../src/cli/duration-option';
import { adminSignal, viewQuery, type BreakerStatus } from '../../src/messages/breaker';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { startEntity } from '../helpers/entity';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';

const run = promisify(execFile);
// The CLI beside this test's build (dist/ or any other outDir).
const cli = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = uniqueTaskQueue('breaker-cli');
const tag = `${process.pid}-${Date.now()}`;
const closedKey = `http://closed-${tag}.example.test:80`;
const failingKey = `http://failing-${tag}.example.test:8080`;
const auditKey = `http://audit-${tag}.example.test:80`;
/** This process as the entity records a sender: the test's client identity, OS user and host. */
const me = () => `sent by ${env.client.options.identity} as ${userInfo().username}@${hostname()}`;
const re = (text: string) => new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));

before(async () => {
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: env.namespace ?? 'default',
    taskQueue,
  });
  running = worker.run();
  await startEntity(env.client, taskQueue, { key: closedKey }, { reporter: 'w1', counts: { success: 5 } });
  await startEntity(env.client, taskQueue, { key: auditKey }, { reporter: 'w1', counts: { success: 5 } });
  const failing = await startEntity(
    env.client,
    taskQueue,
    { key: failingKey },
    { reporter: 'w1', counts: { transient: 25 } },
  );
  assert.equal((await failing.query(viewQuery)).state, 'open');
});
after(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

/** Lists until `pred` holds: visibility is eventually consistent. */
async function listUntil(state: string | undefined, pred: (bs: ListedBreaker[]) => boolean): Promise<ListedBreaker[]> {
  let breakers: ListedBreaker[] = [];
  for (let i = 0; i < 50; i++) {
    breakers = (await listBreakers(env.client, state !== undefined ? { state } : {})).breakers;
    if (pred(breakers)) return breakers;
    await delay(200);
  }
  return breakers;
}

async function cliRun(
  args: string[],
  envVars: Record<string, string | undefined>,
  nodeArgs: string[] = [],
): Promise<{ code: number; out: string; err: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(envVars)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  try {
    const { stdout, stderr } = await run(process.execPath, [...nodeArgs, cli, ...args], {
      env: childEnv,
      timeout: 60_000,
    });
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

// The rest of the connection settings (TLS, API key) are the parent's: set only when testing against a server of one's own.
const serverEnv = () => ({ TEMPORAL_ADDRESS: env.address, TEMPORAL_NAMESPACE: env.namespace ?? 'default' });

test('keys: a key as listed, a workflow id, or an endpoint URL', () => {
  assert.deepEqual(resolveBreakerKey('https://tiles.example.com:443'), {
    key: 'https://tiles.example.com:443',
    workflowId: 'breaker/https://tiles.example.com:443',
    input: 'https://tiles.example.com:443',
    from: 'key',
  });
  assert.equal(resolveBreakerKey('breaker/https://tiles.example.com:443').key, 'https://tiles.example.com:443');
  const fromUrl = resolveBreakerKey('HTTPS://Tiles.Example.com/osm/{z}/{x}/{y}.png');
  assert.equal(fromUrl.key, 'https://tiles.example.com:443');
  assert.equal(fromUrl.from, 'url');
  assert.equal(
    resolveBreakerKey('http://wms.example.com:8080/mapserv?map=a', { partition: 'roads' }).key,
    'http://wms.example.com:8080/roads',
  );
  assert.throws(
    () => resolveBreakerKey('tiles.example.com'),
    /not a breaker key or an endpoint URL: "tiles.example.com"/,
  );
  // A named key, for a call with no URL of its own to key on.
  assert.deepEqual(resolveBreakerKey('breaker/geocoder:primary'), {
    key: 'geocoder:primary',
    workflowId: 'breaker/geocoder:primary',
    input: 'breaker/geocoder:primary',
    from: 'key',
  });
  // A host and port is never a name.
  assert.throws(() => resolveBreakerKey('localhost:8080'), /not a breaker key or an endpoint URL: "localhost:8080"/);
});

test('named keys: lower-case parts joined by a colon; anything else is refused naming the value', () => {
  assert.equal(namedBreakerKey('geocoder:primary'), 'geocoder:primary');
  assert.equal(namedBreakerKey('wfs:parcels:v2'), 'wfs:parcels:v2');
  assert.ok(isCanonicalKey('elevation:eu-west_1'));
  for (const bad of [
    'geocoder',
    'Geocoder:primary',
    'geo coder:a',
    'tiles:8080',
    'http:foo',
    '1geo:a',
    'geo:',
    'a:b/c',
  ]) {
    assert.throws(
      () => namedBreakerKey(bad),
      (err: unknown) =>
        err instanceof Error &&
        err.message.startsWith('breaker key: a name is ') &&
        err.message.endsWith(`(got ${JSON.stringify(bad)})`),
    );
    assert.equal(isCanonicalKey(bad), false, bad);
  }
});

test('durations for --for', () => {
  assert.equal(parseDuration('10m'), 600_000);
  assert.equal(parseDuration('1h30m'), 5_400_000);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('1.5s'), 1_500);
  assert.throws(() => parseDuration('10'), /not a duration/);
  assert.throws(() => parseDuration('10 minutes'), /not a duration/);
  assert.throws(() => parseDuration('0s'), /longer than 0/);
});

test('list shows running entities with their state, and filters by state', async () => {
  // The entity sets its search attributes once its start-up check (an activity) has answered; until then the
  // state comes from its memo.
  const all = await listUntil(
    undefined,
    (bs) =>
      bs.some((b) => b.key === closedKey && b.stateFrom === 'search-attribute') &&
      bs.some((b) => b.key === failingKey && b.state === 'open'),
  );
  const closed = all.find((b) => b.key === closedKey);
  assert.ok(closed, `listed: ${JSON.stringify(all.map((b) => b.key))}`);
  assert.equal(closed.workflowId, `breaker/${closedKey}`);
  assert.equal(closed.state, 'closed');
  assert.equal(closed.stateFrom, 'search-attribute');
  assert.equal(closed.view?.state, 'closed', 'the memo view comes along');
  assert.equal(closed.taskQueue, taskQueue);

  const open = await listUntil('open', (bs) => bs.some((b) => b.key === failingKey));
  assert.ok(open.some((b) => b.key === failingKey));
  assert.ok(!open.some((b) => b.key === closedKey), 'a closed breaker is not listed as open');
  assert.ok(open.every((b) => b.state === 'open'));
  await assert.rejects(listBreakers(env.client, { state: 'opne' }), /must be one of closed, open, half-open/);
});

test('open, close and reset: each confirmed by the status, recorded with reason, claimed actor and sender', async () => {
  const opened = await adminBreaker(env.client, closedKey, 'force-open', {
    reason: 'renderer maintenance',
    durationMs: 600_000,
    actor: 'test:ops',
  });
  assert.equal(opened.confirmed, true);
  assert.equal(opened.status.view.state, 'forced-open');
  assert.ok(opened.status.view.forcedUntil !== null && opened.status.view.forcedUntil > Date.now() + 500_000);
  assert.equal(opened.transition?.reason, 'forced-open');
  assert.equal(opened.transition?.detail, `renderer maintenance (by "test:ops", claimed; ${me()})`);
  assert.equal(opened.transition?.actor, 'test:ops');
  assert.deepEqual(opened.transition?.sender, {
    identity: env.client.options.identity,
    user: userInfo().username,
    host: hostname(),
  });
  assert.deepEqual(opened.sender, opened.transition?.sender);
  assert.equal(opened.status.permit.allow, false);

  // show, by an endpoint URL of the same host: status and the transition log.
  const shown = await showBreaker(env.client, `http://CLOSED-${tag}.example.test/tiles/{z}/{x}/{y}.png`);
  assert.equal(shown.running, true);
  assert.ok(shown.running);
  assert.equal(shown.key, closedKey);
  assert.equal(shown.status.view.state, 'forced-open');
  assert.equal(shown.permitNow.allow, false);
  assert.equal(shown.transitions[0]?.reason, 'forced-open');
  assert.match(shown.transitions[0].detail, /renderer maintenance \(by "test:ops", claimed; sent by /);
  assert.equal(shown.status.figures.successes, 5);

  // The listing follows (eventually).
  const forced = await listUntil('forced-open', (bs) => bs.some((b) => b.key === closedKey));
  assert.ok(forced.some((b) => b.key === closedKey && b.view?.forcedUntil === opened.status.view.forcedUntil));

  const closed = await adminBreaker(env.client, closedKey, 'force-close', { reason: 'renderer back' });
  assert.equal(closed.confirmed, true);
  assert.equal(closed.status.view.state, 'forced-closed');
  assert.equal(closed.transition?.reason, 'forced-close');
  assert.match(
    closed.transition.detail,
    /^renderer back \(by "cli:.+@.+", claimed; sent by .+\)$/,
    'the default actor is cli:<user>@<host>',
  );
  assert.equal(closed.transition?.actor, `cli:${userInfo().username}@${hostname()}`);

  const reset = await adminBreaker(env.client, closedKey, 'reset', { actor: 'test:ops' });
  assert.equal(reset.confirmed, true);
  assert.equal(reset.status.view.state, 'closed');
  assert.equal(reset.status.view.mode, 'auto');
  assert.equal(reset.transition?.reason, 'reset');
  assert.equal(reset.transition?.detail, `by "test:ops", claimed; ${me()}`);

  // A second reset records its own transition (reset always does), and is told apart from the first.
  const again = await adminBreaker(env.client, closedKey, 'reset', { actor: 'test:ops', reason: 'again' });
  assert.equal(again.confirmed, true);
  assert.equal(again.transition?.detail, `again (by "test:ops", claimed; ${me()})`);

  const log = await showBreaker(env.client, closedKey, { limit: 3 });
  assert.deepEqual(
    log.transitions.map((t) => t.reason),
    ['reset', 'reset', 'forced-close'],
  );
});

test('an unknown key errors, naming the key and the workflow id tried', async () => {
  const key = `http://nope-${tag}.example.test:80`;
  await assert.rejects(showBreaker(env.client, key), (err: unknown) => {
    assert.ok(err instanceof BreakerNotFoundError);
    assert.match(err.message, new RegExp(`no breaker entity for key ${key.replace(/[.]/g, '\\.')}`));
    assert.ok(
      err.message.includes(`workflow id "breaker/${key}" not found in namespace "${env.namespace ?? 'default'}"`),
      err.message,
    );
    return true;
  });
  await assert.rejects(adminBreaker(env.client, key, 'force-open'), BreakerNotFoundError);
  // A key typed with a path: the error points at the origin key too.
  await assert.rejects(
    showBreaker(env.client, `http://nope-${tag}.example.test:80/osm/1/2/3.png`),
    /its key is http:\/\/nope-.*:80 \(paths are not part of a key\)/,
  );
});

test('an entity that is not running: show reports it, admin refuses', async () => {
  const key = `http://gone-${tag}.example.test:80`;
  const h = await startEntity(env.client, taskQueue, { key });
  await h.signal(adminSignal, { action: 'force-open', reason: 'before the end', actor: 'test' });
  assert.equal((await h.query(viewQuery)).state, 'forced-open');
  await h.terminate('test');
  const shown = await showBreaker(env.client, key);
  assert.equal(shown.running, false);
  assert.ok(!shown.running);
  assert.equal(shown.executionStatus, 'TERMINATED');
  await assert.rejects(
    adminBreaker(env.client, key, 'reset'),
    (err: unknown) =>
      err instanceof BreakerNotRunningError && /is not running: its latest run is TERMINATED/.test(err.message),
  );
});

test("an entity that finished idle: show gives its last run's transitions", async () => {
  const key = `http://idle-${tag}.example.test:80`;
  const h = await startEntity(env.client, taskQueue, { key, options: { idleMs: 300 } });
  await h.signal(adminSignal, { action: 'reset', reason: 'last words', actor: 'test' });
  await h.result();
  const shown = await showBreaker(env.client, key);
  assert.ok(!shown.running);
  assert.equal(shown.executionStatus, 'COMPLETED');
  assert.ok(shown.closeTime instanceof Date);
  assert.equal(shown.transitions[0]?.detail, 'last words (by "test", claimed)');
  await assert.rejects(
    adminBreaker(env.client, key, 'force-open'),
    /is not running: its latest run is COMPLETED since .* the next report starts it again/,
  );
});

test('the CLI: breaker list --json and breaker show against the server', async () => {
  // The listing may still lag: retry the process a few times.
  let listed: { key: string; state: string; workflowId: string }[] = [];
  for (let i = 0; i < 10 && !listed.some((b) => b.key === failingKey); i++) {
    const r = await cliRun(['breaker', 'list', '--json'], serverEnv());
    assert.equal(r.code, 0, r.err);
    // One object, its rows under items, as every list command gives them.
    const doc = JSON.parse(r.out) as { items: typeof listed; count: number; query: string };
    assert.equal(doc.count, doc.items.length);
    assert.match(doc.query, /WorkflowType = /);
    listed = doc.items;
    if (!listed.some((b) => b.key === failingKey)) await delay(300);
  }
  const failing = listed.find((b) => b.key === failingKey);
  assert.ok(failing, JSON.stringify(listed));
  assert.equal(failing.state, 'open');
  assert.equal(failing.workflowId, `breaker/${failingKey}`);

  const show = await cliRun(['breaker', 'show', failingKey], serverEnv());
  assert.equal(show.code, 0, show.err);
  assert.match(show.out, new RegExp(`^breaker ${failingKey.replace(/[.]/g, '\\.')}$`, 'm'));
  assert.match(show.out, /^ {2}state {8}open, cooldown ends \d{4}-\d\d-\d\dT/m);
  // A new entity's cooldown grows only for a trip soon after a close (one incident is one open).
  assert.match(show.out, /^ {2}config .*\(x2 per trip within [^,]+ of a close, cap x\d+\)/m);
  assert.match(show.out, /^ {2}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}closed -> open {2}failure-ratio: /m);

  const showJson = await cliRun(['breaker', 'show', failingKey, '--json', '--limit', '1'], serverEnv());
  assert.equal(showJson.code, 0, showJson.err);
  const j = JSON.parse(showJson.out) as { status: BreakerStatus; transitions: TransitionRecord[] };
  assert.equal(j.status.view.state, 'open');
  assert.equal(j.transitions.length, 1);

  // "How long was it open?": the failing breaker opened when this file's setup ran and has not closed.
  const since = await cliRun(['breaker', 'show', failingKey, '--since', '1h'], serverEnv());
  assert.equal(since.code, 0, since.err);
  assert.match(since.out, /^over the last 1h 00m \(since \d{4}-.*\): open [^,]+, not closed .* in 1 interval$/m);
  assert.match(since.out, /^ {2}\d{4}-\d\d-\d\dT[\d:.]+Z -> now \(still not closed\) {2}\S+ {2}failure-ratio \(open /m);
  const sinceJson = await cliRun(['breaker', 'show', failingKey, '--since', '1h', '--json'], serverEnv());
  const report = (
    JSON.parse(sinceJson.out) as { openReport: { intervals: { reason: string; to: number | null }[]; openMs: number } }
  ).openReport;
  assert.deepEqual(
    report.intervals.map((i) => [i.reason, i.to]),
    [['failure-ratio', null]],
  );
  assert.ok(report.openMs > 0);

  const missing = await cliRun(['breaker', 'show', `http://nope-${tag}.example.test:80`], serverEnv());
  assert.equal(missing.code, 2);
  assert.ok(missing.err.includes(`workflow id "breaker/http://nope-${tag}.example.test:80" not found`), missing.err);

  const badDuration = await cliRun(['breaker', 'open', failingKey, '--for', 'ten minutes'], serverEnv());
  assert.equal(badDuration.code, 2);
  assert.match(badDuration.err, /not a duration/);
});

test('the CLI: breaker open --actor records the actor as claimed, beside the identity of the process that sent it', async () => {
  const open = await cliRun(
    ['breaker', 'open', auditKey, '--actor', 'mallory', '--reason', 'audit', '--json'],
    serverEnv(),
  );
  assert.equal(open.code, 0, open.err);
  const result = JSON.parse(open.out) as AdminResult;
  assert.equal(result.confirmed, true);
  // The CLI's own client: its identity is <pid>@<host> of the CLI process, whatever --actor says.
  const { sender } = result;
  assert.match(sender.identity, new RegExp(`^\\d+@${hostname().replace(/[.]/g, '\\.')}$`));
  assert.notEqual(sender.identity, env.client.options.identity, 'the sender is the CLI process, not this test');
  assert.equal(sender.user, userInfo().username);
  assert.equal(sender.host, hostname());
  const detail = `audit (by "mallory", claimed; sent by ${sender.identity} as ${sender.user}@${sender.host})`;
  assert.equal(result.transition?.detail, detail);

  const showJson = await cliRun(['breaker', 'show', auditKey, '--json', '--limit', '1'], serverEnv());
  assert.equal(showJson.code, 0, showJson.err);
  const [t] = (JSON.parse(showJson.out) as { transitions: TransitionRecord[] }).transitions;
  assert.ok(t);
  assert.equal(t.reason, 'forced-open');
  assert.equal(t.detail, detail);
  assert.equal(t.actor, 'mallory');
  assert.deepEqual(t.sender, sender);

  const show = await cliRun(['breaker', 'show', auditKey], serverEnv());
  assert.equal(show.code, 0, show.err);
  assert.match(show.out, re(`forced-open: ${detail}`));

  // A claimed actor that imitates the sender part stays inside its quotes; the real sender follows it.
  const forged = await adminBreaker(env.client, auditKey, 'reset', {
    actor: 'x", claimed; sent by 1@trusted as admin@trusted',
  });
  assert.equal(forged.transition?.detail, `by "x\\", claimed; sent by 1@trusted as admin@trusted", claimed; ${me()}`);
  assert.equal(forged.transition?.actor, 'x", claimed; sent by 1@trusted as admin@trusted');
});

test('the CLI: an unreachable server and an unset TEMPORAL_ADDRESS exit 2, saying what is wrong', async () => {
  const unreachable = await cliRun(['breaker', 'list'], { ...serverEnv(), TEMPORAL_ADDRESS: '127.0.0.1:1' });
  assert.equal(unreachable.code, 2, unreachable.err);
  assert.match(unreachable.err, /127\.0\.0\.1:1/);

  const unset = await cliRun(['breaker', 'list'], { ...serverEnv(), TEMPORAL_ADDRESS: undefined });
  assert.equal(unset.code, 2);
  assert.match(unset.err, /breaker commands need TEMPORAL_ADDRESS.*e\.g\. TEMPORAL_ADDRESS=127\.0\.0\.1:7233/);

  const help = await cliRun(['breaker', 'open', '--help'], {});
  assert.equal(help.code, 0);
  assert.match(help.out, /--for <duration>/);
});

test('an emergency force-open is signalled before anything is read: an entity that cannot answer queries still gets it', async () => {
  // Nobody polls this queue yet: the server accepts signals, but queries wait for a worker that is not there
  // (as they wait behind an entity's busy workflow tasks under load).
  const queue = uniqueTaskQueue('breaker-cli-unpolled');
  const key = `http://unpolled-${tag}.example.test:80`;
  await startEntity(env.client, queue, { key });
  const before = Date.now();
  await assert.rejects(
    adminBreaker(env.client, key, 'force-open', {
      reason: 'renderer on fire',
      actor: 'test:ops',
      confirmTimeoutMs: 1_000,
    }),
    (err: unknown) => {
      assert.ok(err instanceof AdminNotConfirmedError, String(err));
      assert.equal(err.action, 'force-open');
      assert.equal(err.workflowId, `breaker/${key}`);
      assert.ok(err.sentAt >= before && err.sentAt <= Date.now());
      assert.match(
        err.message,
        /the force-open signal was sent to breaker .* and accepted by the server, but is not yet confirmed: the entity answered no status query within/,
      );
      return true;
    },
  );
  // A worker comes: the signal was delivered, so the breaker opens without anyone sending it again.
  const late = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: env.namespace ?? 'default',
    taskQueue: queue,
  });
  await late.runUntil(async () => {
    const shown = await showBreaker(env.client, key);
    assert.ok(shown.running);
    assert.equal(shown.status.view.state, 'forced-open');
    assert.match(shown.transitions[0]?.detail ?? '', /^renderer on fire \(by "test:ops", claimed/);
  });
});

test(`the CLI: breaker open that the server accepted but the entity has not confirmed exits ${EXIT_SENT_NOT_CONFIRMED}, "sent, not yet confirmed"; once applied, open exits 0`, async () => {
  // A key whose entity the signal starts on a queue nobody polls: the signal is accepted, never applied (yet).
  const queue = uniqueTaskQueue('breaker-cli-unconfirmed');
  const key = `http://unconfirmed-${tag}.example.test:80`;
  const cliEnv = { ...serverEnv(), TILEBREAKER_TASK_QUEUE: queue };
  const sent = await cliRun(
    ['breaker', 'open', key, '--for', '10m', '--reason', 'renderer on fire', '--confirm-timeout', '2s'],
    cliEnv,
  );
  assert.equal(sent.code, EXIT_SENT_NOT_CONFIRMED, sent.err);
  assert.match(
    sent.err,
    new RegExp(
      `force-open of breaker ${key.replace(/[.]/g, '\\.')} SENT, NOT YET CONFIRMED: the server accepted the signal at \\d{4}-`,
    ),
  );
  assert.match(sent.err, /the entity answered no status query within \d+\.\d s of the signal/);
  assert.match(sent.err, /applies it at its next workflow task, without it being sent again/);
  // It is not a failure to run, and nothing is blamed on the workers.
  assert.doesNotMatch(sent.err, /poll/i);

  const json = await cliRun(['breaker', 'reset', key, '--json', '--confirm-timeout', '1s'], cliEnv);
  assert.equal(json.code, EXIT_SENT_NOT_CONFIRMED, json.err);
  const r = JSON.parse(json.out) as {
    key: string;
    workflowId: string;
    action: string;
    sent: boolean;
    sentAt: number;
    confirmed: boolean;
    why: string;
  };
  assert.equal(r.key, key);
  assert.equal(r.workflowId, `breaker/${key}`);
  assert.equal(r.action, 'reset');
  assert.equal(r.sent, true);
  assert.equal(r.confirmed, false);
  assert.match(r.why, /answered no status query/);

  // A worker comes for that queue: both signals apply in order (open, then reset), with no one sending them
  // again; an open now is confirmed and exits 0.
  const late = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: env.namespace ?? 'default',
    taskQueue: queue,
  });
  await late.runUntil(async () => {
    const log = await showBreaker(env.client, key, { limit: 5 });
    assert.deepEqual(
      log.transitions.map((t) => t.reason),
      ['reset', 'forced-open'],
    );
    const open = await cliRun(['breaker', 'open', key, '--for', '10m', '--json'], cliEnv);
    assert.equal(open.code, 0, open.err);
    const result = JSON.parse(open.out) as AdminResult;
    assert.equal(result.confirmed, true);
    assert.equal(result.status.view.state, 'forced-open');
    assert.equal(result.transition?.reason, 'forced-open');
  });
});

test('a breaker can be opened ahead of a maintenance window: open and configure start an entity for a key that has none', async () => {
  const key = `http://maintenance-${tag}.example.test:80`;
  await assert.rejects(showBreaker(env.client, key), BreakerNotFoundError);
  const opened = await adminBreaker(env.client, key, 'force-open', {
    reason: 'renderer upgrade',
    durationMs: 3_600_000,
    actor: 'test:ops',
    taskQueue,
  });
  assert.equal(opened.confirmed, true);
  assert.equal(opened.status.view.state, 'forced-open');
  assert.equal(opened.transition?.reason, 'forced-open');

  // The CLI: configure a key with no entity, then read it back; a bad value is refused naming the field.
  const fresh = `http://configured-${tag}.example.test:80`;
  const cliEnv = { ...serverEnv(), TILEBREAKER_TASK_QUEUE: taskQueue };
  const set = await cliRun(['breaker', 'configure', fresh, 'maxRequestsPerSecond=20', 'cooldownMs=45000'], cliEnv);
  assert.equal(set.code, 0, set.err);
  assert.match(set.out, /configure done; now maxRequestsPerSecond=20 cooldownMs=45000/);
  const shown = await showBreaker(env.client, fresh);
  assert.ok(shown.running);
  assert.equal(shown.status.config.maxRequestsPerSecond, 20);
  const bad = await cliRun(['breaker', 'configure', fresh, 'minSamples=-1'], cliEnv);
  assert.equal(bad.code, 2, bad.out);
  assert.match(bad.err, /minSamples/);
  const malformed = await cliRun(['breaker', 'configure', fresh, 'minSamples'], cliEnv);
  assert.equal(malformed.code, 2);
  assert.match(malformed.err, /expected field=value, e\.g\. maxRequestsPerSecond=20 \(got "minSamples"\)/);
});

test("an operator's configure lasts: an entity with a configuration change does not end when idle; one without does", async () => {
  const configured = `http://keeps-${tag}.example.test:80`;
  const plain = `http://ends-${tag}.example.test:80`;
  const h = await startEntity(env.client, taskQueue, { key: configured, options: { idleMs: 500 } });
  const p = await startEntity(env.client, taskQueue, { key: plain, options: { idleMs: 500 } });
  const done = await configureBreaker(env.client, configured, { maxRequestsPerSecond: 7 }, { actor: 'test:ops' });
  assert.equal(done.confirmed, true);
  await p.result(); // idle: ends
  await delay(1_500);
  const d = await h.describe();
  assert.equal(d.status.name, 'RUNNING', 'a configured entity stays past its idle time');
  assert.equal((await breakerStatus(env.client, configured)).config.maxRequestsPerSecond, 7);
});

test('the CLI starts lean for breaker commands: open, show and list load neither the worker, the activities, sharp, undici, the S3 client nor the mosaic schemas', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-lean-'));
  const recorder = path.join(__dirname, '..', 'helpers', 'loaded-modules.js');
  const key = `http://lean-${tag}.example.test:80`;
  // What no breaker command needs: the SDK's worker and its native bridge, workflow bundling, the fetch path's
  // HTTP and image libraries, the S3 client, the other commands and the mosaic request's validation.
  const heavy = [
    /\/node_modules\/@temporalio\/(worker|core-bridge|testing)\//,
    /\/node_modules\/(sharp|@img|undici|webpack|@aws-sdk|@smithy|yaml|cli-progress|fast-xml-parser)\//,
    /\/src\/(workflows|demo)\//,
    // Only the two small modules that name the roots' environment variables (the worker's option help).
    /\/src\/activities\/(?!confine\/roots\.js$|storage\/location\.js$)/,
    /\/src\/cli\/(mosaic-commands|worker-command|tile-command|run-drill|demo-mosaic|preflight)\.js$/,
    /\/src\/client\/(worker|mosaics|schedules|embedded-server)\.js$/,
    /\/src\/messages\/mosaic-request\.js$/,
  ];
  try {
    for (const args of [
      ['breaker', 'open', key, '--for', '1m', '--reason', 'lean start'],
      ['breaker', 'show', key],
      ['breaker', 'list'],
    ]) {
      const out = path.join(dir, `${args[1]}.json`);
      const r = await cliRun(
        args,
        { ...serverEnv(), TILEBREAKER_TASK_QUEUE: taskQueue, TILEBREAKER_TEST_MODULES_OUT: out },
        ['--require', recorder],
      );
      assert.equal(r.code, 0, r.err);
      const loaded = JSON.parse(readFileSync(out, 'utf8')) as string[];
      // The recorder sees what the command ran with.
      assert.ok(
        loaded.some((f) => f.endsWith(path.join('src', 'cli', 'breaker-commands.js'))),
        `breaker ${args[1]}: ${loaded.length} files`,
      );
      assert.ok(loaded.some((f) => /\/node_modules\/@temporalio\/client\//.test(f)));
      assert.deepEqual(
        loaded.filter((f) => heavy.some((re) => re.test(f.split(path.sep).join('/')))),
        [],
        `breaker ${args[1]} loaded these`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the CLI: force-close is its own command (never trips until reset, and show says so); close goes back to automatic closed', async () => {
  const key = `http://forced-${tag}.example.test:80`;
  const cliEnv = { ...serverEnv(), TILEBREAKER_TASK_QUEUE: taskQueue };
  const help = await cliRun(['breaker', '--help'], {});
  assert.match(
    help.out,
    /^ {2}force-close \[options\] <key>\s+force a breaker closed: .* it never trips until `breaker reset`/m,
  );
  assert.match(help.out, /^ {2}close \[options\] <key>\s+close a breaker: back to automatic/m);

  const forced = await cliRun(['breaker', 'force-close', key, '--reason', 'vendor says ignore errors'], cliEnv);
  assert.equal(forced.code, 0, forced.err);
  assert.match(
    forced.out,
    /: force-close done; state now forced-closed: never trips until `breaker reset` or `breaker close`$/m,
  );
  const shown = await cliRun(['breaker', 'show', key], cliEnv);
  assert.match(shown.out, /^ {2}state {8}forced-closed: never trips until `breaker reset` or `breaker close`$/m);
  // Failures do not trip it.
  const h = env.client.workflow.getHandle(`breaker/${key}`);
  assert.equal((await h.query(viewQuery)).state, 'forced-closed');

  // `close`: back to automatic closed (a reset), not forced: the JSON names the command and the signal sent.
  const closed = await cliRun(['breaker', 'close', key, '--json'], cliEnv);
  assert.equal(closed.code, 0, closed.err);
  const r = JSON.parse(closed.out) as AdminResult & { command: string };
  assert.deepEqual(
    [r.command, r.action, r.expected, r.confirmed, r.status.view.state, r.status.view.mode],
    ['close', 'reset', 'closed', true, 'closed', 'auto'],
  );
  assert.equal(r.transition?.reason, 'reset');
  const text = await cliRun(['breaker', 'close', key], cliEnv);
  assert.match(text.out, /: close \(reset\) done; state now closed \(automatic: trips again on failures\)$/m);
});
