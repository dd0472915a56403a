import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { hostname } from 'node:os';
import { test } from 'node:test';
import type { Client } from '@temporalio/client';
import { createActivityRuntime } from '../../src/activities';
import { processIdentity, witnessIdentity, WITNESS_ENV } from '../../src/activities/guard';
import type { EntityLink } from '../../src/activities/guard/entity-link';
import { ReportSender } from '../../src/activities/guard/report-sender';
import { FleetSizes, ReportSchedule } from '../../src/activities/guard/report-spacing';
import { resolveGuardOptions, type GuardStats } from '../../src/activities/guard/types';
import type { ViewCache } from '../../src/activities/guard/view-cache';
import type { OutcomeReport } from '../../src/messages/breaker';

test('reporter ids differ between processes that share a pid (container replicas are all pid 1)', () => {
  // Two guards in one process stand for two replicas with the same pid and, with host networking, one host name.
  const a = processIdentity('worker');
  const b = processIdentity('worker');
  assert.notEqual(a, b);
  for (const id of [a, b]) {
    assert.ok(id.startsWith(`worker-${process.pid}@${hostname()}-`), id);
    assert.match(id, /-[0-9a-f]{8}$/);
  }
});

test("a worker's guard reports under such an id: two runtimes in one process (two replicas, one pid) are two reporters", async () => {
  const client = {} as Client; // nothing is sent: the runtimes are built and closed
  const a = createActivityRuntime({ client, taskQueue: 'q' });
  const b = createActivityRuntime({ client, taskQueue: 'q' });
  try {
    assert.notEqual(a.identity, b.identity);
    assert.match(a.identity, new RegExp(`^worker-${process.pid}@`));
  } finally {
    await a.close();
    await b.close();
  }
});

/** The reporter id and the witness a new process on this host starts with (a restart is a new process). */
function startedProcess(env: NodeJS.ProcessEnv = {}): { reporter: string; witness: string } {
  const script = `const g = require(${JSON.stringify(require.resolve('../../src/activities/guard/reporter-id'))}); console.log(JSON.stringify({ reporter: g.processIdentity('worker'), witness: g.witnessIdentity() }));`;
  const { [WITNESS_ENV]: _drop, ...base } = process.env;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...base, ...env }, encoding: 'utf8' })) as {
    reporter: string;
    witness: string;
  };
}

test('a worker restart keeps its witness: a new reporter id, the same host witness', () => {
  const before = startedProcess();
  const after = startedProcess();
  assert.notEqual(after.reporter, before.reporter, 'rate shares and probe tokens still tell the processes apart');
  assert.equal(after.witness, before.witness);
  assert.equal(before.witness, `host:${hostname()}`);
  // Configured, to count several workers on one host apart on purpose: kept across restarts too.
  assert.equal(startedProcess({ [WITNESS_ENV]: 'rack-7-worker-2' }).witness, 'rack-7-worker-2');
  assert.equal(startedProcess({ [WITNESS_ENV]: 'rack-7-worker-2' }).witness, 'rack-7-worker-2');
});

test('a witness set too long or with control characters is refused, naming the variable and not quoting it', () => {
  assert.throws(
    () => witnessIdentity({ [WITNESS_ENV]: 'x'.repeat(300) }),
    /^Error: TILEBREAKER_REPORTER_ID must be at most 256 characters without control characters \(got 300 characters\)$/,
  );
  assert.throws(
    () => witnessIdentity({ [WITNESS_ENV]: 'a\nb' }),
    /TILEBREAKER_REPORTER_ID must be .* \(got 3 characters\)/,
  );
  assert.equal(witnessIdentity({}, 'node-3'), 'host:node-3');
});

test("two runtimes of one host (a restart, or a second worker) report under two ids with one witness, and the guard's reports carry it", async () => {
  const client = {} as Client; // nothing is sent: the runtimes are built and closed
  const a = createActivityRuntime({ client, taskQueue: 'q' });
  const b = createActivityRuntime({ client, taskQueue: 'q' });
  try {
    assert.notEqual(a.identity, b.identity);
    assert.equal(a.witness, b.witness);
  } finally {
    await a.close();
    await b.close();
  }
  const sent: OutcomeReport[] = [];
  const o = resolveGuardOptions({
    client,
    taskQueue: 'q',
    reporter: a.identity,
    witness: a.witness,
    logger: { warn: () => {} },
  });
  const link = {
    rpc: <T>(fn: () => Promise<T>) => fn(),
    handle: () => ({ signal: (_def: unknown, r: OutcomeReport) => (sent.push(r), Promise.resolve()) }),
    losses: { delivered: () => {} },
    reportDropped: () => {},
  } as unknown as EntityLink;
  const signalWithStart = (_wf: unknown, opts: { signalArgs: [OutcomeReport] }) => (
    sent.push(opts.signalArgs[0]),
    Promise.resolve()
  );
  (client as unknown as { workflow: unknown }).workflow = { signalWithStart };
  const views = { last: () => null, invalidate: () => {} } as unknown as ViewCache;
  const s = new ReportSender(
    o,
    link,
    views,
    { reportsSent: 0 } as GuardStats,
    () => 1,
    () => undefined,
    new ReportSchedule(o, new FleetSizes(), () => 0.5),
  );
  s.add('k', { kind: 'transient', latencyMs: 5 });
  await s.flushDue();
  assert.equal(sent.length, 1);
  assert.deepEqual([sent[0]!.reporter, sent[0]!.witness], [a.identity, a.witness]);
});
