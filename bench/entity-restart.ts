/**
 * bench:entity-restart: how soon a breaker entity answers again after its Temporal server restarts while a fleet's
 * reports pour in (the target: its first workflow task completes within 10 s of the server being ready).
 *
 * A dev server on a SQLite file (scripts/fleet/temporal-process.ts: stopped and started again on the same address
 * and history), one real tilebreaker worker process (bench/force-open/worker-child.ts) and a client that sends
 * --rate report signals a second from --reporters reporters to one entity, as the guards do (signal-with-start
 * first, then plain signals under a 2 s deadline each, dropped when they fail). After --warmup seconds, once the
 * entity's run has --kill-at-events events (near its limit of 1,000: the worst moment, its first task after the
 * restart continues as new), the server is killed (SIGKILL), left down --down seconds and started again; the
 * reports go on throughout. As soon as the server answers a force-open is sent (retried until accepted), and the
 * bench reads the entity's memo until it shows it. Then, from the entity's histories (every run: a
 * continue-as-new starts one):
 *   first-task-ms  from the server being ready to the entity's first completed workflow task after it;
 *   applied-ms     from the server being ready to the force-open in the memo (what a guard reads);
 *   task-timeouts  WorkflowTaskTimedOut and WorkflowTaskFailed events after the kill, plus the attempts the server
 *                  did not write down (a task retried after a failure is transient: only the attempt that
 *                  completes shows, with its attempt number);
 *   history-events the length of the run's history when the server was killed;
 *   replay-ms      a cache-less replay of the entity's longest run, timed here (what a worker that lost its cache
 *                  pays before the entity's next task can complete).
 * The entity is reset and the load goes on for --settle seconds before the next of --restarts restarts. The
 * baseline is the same restart with no reports at all (--idle-baseline, on by default), first. Prints one line
 * per restart, then:
 *   restart: rate=<n> first-task-ms=<int> applied-ms=<int> task-timeouts=<int> history-events=<int> replay-ms=<int> idle-first-task-ms=<int>
 * (the worst restart's figures; the idle baseline's first-task-ms).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir, loadavg, setPriority } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { Command } from 'commander';
import { breakerKey, breakerWorkflowId, LATENCY_BUCKETS, type BreakerView } from '../src/breaker';
import { localBinaries } from '../src/client/local-server';
import { workflowsPath } from '../src/client/worker';
import {
  adminSignal,
  BREAKER_ENTITY_WORKFLOW,
  reportSignal,
  type EntityInput,
  type OutcomeReport,
} from '../src/messages/breaker';
import { temporalProcess, type TemporalProcess } from '../scripts/fleet/temporal-process';
import { endOnSignals, adopt } from '../src/demo/children';

interface Opts {
  rate: string;
  reporters: string;
  warmup: string;
  down: string;
  settle: string;
  restarts: string;
  idleBaseline: boolean;
  maxHistoryEvents?: string;
  coldWorker: boolean;
  debug: boolean;
  saveHistory?: string;
  workerNice: string;
  backlog: string;
  killAtEvents: string;
}

interface Figures {
  firstTaskMs: number | null;
  appliedMs: number | null;
  taskTimeouts: number;
  historyEvents: number;
}

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];

Runtime.install({ logger: new DefaultLogger('WARN') });

const TASK_QUEUE = 'bench-entity-restart';
/** The workflow task events --debug lists, by EventType number. */
const TASK_EVENT: Record<number, string> = {
  5: 'task-scheduled',
  6: 'task-started',
  7: 'task-completed',
  8: 'task-timed-out',
  9: 'task-failed',
};
/** How long the bench waits for the force-open to show before it gives up on a restart. */
const APPLY_LIMIT_MS = 240_000;

function timeOf(e: HistoryEvent): number {
  const t = e.eventTime;
  return t ? Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6 : 0;
}

/** A report as a guard sends it: a second or so of successes from a worker with a few calls in flight. */
function report(reporter: string, n: number, everyMs: number): OutcomeReport {
  const latency = new Array<number>(LATENCY_BUCKETS).fill(0);
  latency[12 + (n % 5)] = 8 + (n % 7);
  latency[18] = 2;
  const counts =
    n % 11 === 0
      ? { success: latency.reduce((a, b) => a + b, 0) - 1, transient: 1 }
      : { success: latency.reduce((a, b) => a + b, 0) };
  return { reporter, counts, latency, inFlight: 2 + (n % 3), everyMs };
}

/**
 * Sends `rate` reports a second, round-robin over `reporters`, each under a 2 s deadline and at most 64 at once
 * (as a fleet's guards do: a report that fails is dropped). Stopped by `stop()`.
 */
function startLoad(client: Client, key: string, rate: number, reporters: number) {
  const handle = client.workflow.getHandle(breakerWorkflowId(key));
  const ids = Array.from({ length: reporters }, (_, i) => `bench-${i}@${process.pid}`);
  const everyMs = Math.round((1000 * reporters) / Math.max(rate, 0.001));
  let sent = 0;
  let failed = 0;
  let inFlight = 0;
  let stopped = false;
  const run = (async () => {
    if (rate <= 0) return;
    const start = Date.now();
    for (let n = 0; !stopped; n++) {
      const due = start + (n * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      if (inFlight >= 64) {
        failed++;
        continue;
      }
      inFlight++;
      client.connection
        .withDeadline(Date.now() + 2_000, () => handle.signal(reportSignal, report(ids[n % reporters]!, n, everyMs)))
        .then(
          () => sent++,
          () => failed++,
        )
        .finally(() => inFlight--);
    }
  })();
  return {
    counts: () => ({ sent, failed }),
    stop: async () => {
      stopped = true;
      await run;
      while (inFlight > 0) await sleep(50);
    },
  };
}

async function viewOf(handle: WorkflowHandle): Promise<{ view: BreakerView | undefined; historyLength: number }> {
  const d = await handle.describe();
  return { view: d.memo?.['view'] as BreakerView | undefined, historyLength: d.historyLength };
}

/**
 * What each continue-as-new cost: per hand-over, the workflow tasks that failed (the server refuses a
 * continue-as-new while signals wait, and the next attempt replays the whole run) and the gap between the old
 * run's last task that applied something and the new run's first.
 */
function handOvers(all: History[]): { n: number; failed: number; gapsMs: number[] } {
  let failed = 0;
  const gapsMs: number[] = [];
  for (let i = 0; i + 1 < all.length; i++) {
    const events = all[i]!.events ?? [];
    const done = events.filter((e) => e.workflowTaskCompletedEventAttributes);
    // The last completion is the one that continued as new; the one before it applied the last signals.
    const lastApplied = done.length >= 2 ? timeOf(done[done.length - 2]!) : null;
    failed += events.filter((e) => e.workflowTaskFailedEventAttributes && timeOf(e) >= (lastApplied ?? 0)).length;
    const next = (all[i + 1]!.events ?? []).find((e) => e.workflowTaskCompletedEventAttributes);
    if (lastApplied !== null && next) gapsMs.push(timeOf(next) - lastApplied);
  }
  return { n: gapsMs.length, failed, gapsMs: gapsMs.sort((a, b) => a - b) };
}

/** Every run of the entity, oldest first. */
async function histories(client: Client, workflowId: string): Promise<History[]> {
  const runs: { runId: string; start: number }[] = [];
  for await (const e of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(workflowId)}` }))
    runs.push({ runId: e.runId, start: e.startTime.getTime() });
  runs.sort((a, b) => a.start - b.start);
  const out: History[] = [];
  for (const r of runs) out.push(await client.workflow.getHandle(workflowId, r.runId).fetchHistory());
  return out;
}

/** Retries `fn` until it succeeds (the server may answer its system info before the namespace is served). */
async function untilAccepted(what: string, fn: () => Promise<unknown>, withinMs = 60_000): Promise<void> {
  const end = Date.now() + withinMs;
  for (;;) {
    try {
      await fn();
      return;
    } catch (err) {
      if (Date.now() > end)
        throw new Error(
          `${what} was not accepted within ${withinMs / 1000} s: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
      await sleep(100);
    }
  }
}

/**
 * One restart: kill, wait `downMs`, start again, force-open at once, read how long it took to show, and what
 * the histories say about the workflow tasks after the kill.
 */
async function restartOnce(
  temporal: TemporalProcess,
  client: Client,
  key: string,
  downMs: number,
  label: string,
  worker: WorkerSlot,
  debug = false,
): Promise<Figures> {
  const workflowId = breakerWorkflowId(key);
  const handle = client.workflow.getHandle(workflowId);
  const { historyLength } = await viewOf(handle);
  const killedAt = Date.now();
  await Promise.all([temporal.stop('SIGKILL'), worker.cold ? worker.kill() : undefined]);
  await sleep(downMs);
  await temporal.start();
  const readyAt = Date.now();
  if (worker.cold)
    void worker.start().then(() => {
      if (debug) console.log(`    worker process polling again at ready+${Date.now() - readyAt} ms`);
    });
  await untilAccepted('the force-open signal', () =>
    client.connection.withDeadline(Date.now() + 5_000, () =>
      handle.signal(adminSignal, { action: 'force-open', reason: 'bench:entity-restart', actor: 'bench' }),
    ),
  );
  const sentAt = Date.now();
  let appliedAt: number | null = null;
  while (Date.now() - readyAt < APPLY_LIMIT_MS) {
    const v = await client.connection.withDeadline(Date.now() + 5_000, () => viewOf(handle)).catch(() => null);
    if (v?.view?.state === 'forced-open') {
      appliedAt = Date.now();
      break;
    }
    await sleep(100);
  }
  let firstTaskAt: number | null = null;
  let timedOut = 0;
  let failed = 0;
  let transient = 0;
  let firstScheduled: string | null = null;
  for (const h of await histories(client, workflowId)) {
    const scheduled = new Map<string, HistoryEvent>();
    for (const e of h.events ?? []) {
      const at = timeOf(e);
      if (e.workflowTaskScheduledEventAttributes) scheduled.set(String(e.eventId), e);
      if (at < killedAt) continue;
      if (e.workflowTaskTimedOutEventAttributes) timedOut++;
      if (e.workflowTaskFailedEventAttributes) failed++;
      if (
        debug &&
        (e.workflowTaskScheduledEventAttributes ||
          e.workflowTaskStartedEventAttributes ||
          e.workflowTaskCompletedEventAttributes ||
          e.workflowTaskTimedOutEventAttributes ||
          e.workflowTaskFailedEventAttributes)
      ) {
        const detail = e.workflowTaskScheduledEventAttributes
          ? `queue ${e.workflowTaskScheduledEventAttributes.taskQueue?.name} attempt ${e.workflowTaskScheduledEventAttributes.attempt}`
          : e.workflowTaskTimedOutEventAttributes
            ? `timeout type ${e.workflowTaskTimedOutEventAttributes.timeoutType}`
            : e.workflowTaskFailedEventAttributes
              ? `cause ${e.workflowTaskFailedEventAttributes.cause} ${e.workflowTaskFailedEventAttributes.failure?.message ?? ''}`
              : '';
        console.log(
          `    event ${String(e.eventId)} ${TASK_EVENT[Number(e.eventType)] ?? String(e.eventType)} at ready${at >= readyAt ? '+' : ''}${Math.round(at - readyAt)} ms ${detail}`,
        );
      }
      const done = e.workflowTaskCompletedEventAttributes;
      if (done) {
        const s = scheduled.get(String(done.scheduledEventId));
        const attempt = s?.workflowTaskScheduledEventAttributes?.attempt ?? 1;
        // Attempts after the first of a failed or timed-out task leave no event of their own.
        if (attempt > 1) transient += attempt - 2;
        if (at >= readyAt && firstTaskAt === null) {
          firstTaskAt = at;
          if (s) firstScheduled = `scheduled +${Math.round(timeOf(s) - readyAt)} ms, attempt ${attempt}`;
        }
      }
    }
  }
  const f: Figures = {
    firstTaskMs: firstTaskAt === null ? null : Math.round(firstTaskAt - readyAt),
    appliedMs: appliedAt === null ? null : Math.round(appliedAt - readyAt),
    taskTimeouts: timedOut + failed + transient,
    historyEvents: historyLength,
  };
  console.log(
    `  ${label}: killed at ${historyLength} events, down ${Math.round((readyAt - killedAt) / 100) / 10} s; force-open accepted +${sentAt - readyAt} ms, ` +
      `in the memo +${f.appliedMs ?? 'never'} ms; first task after ready +${f.firstTaskMs ?? 'never'} ms (${firstScheduled ?? '-'}); ` +
      `timed out ${timedOut}, failed ${failed}, unrecorded attempts ${transient}; load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  await untilAccepted('the reset signal', () =>
    handle.signal(adminSignal, { action: 'reset', reason: 'bench:entity-restart', actor: 'bench' }),
  );
  return f;
}

/** The worker process; with --cold-worker it dies with the server and starts again once it is back (no cache). */
interface WorkerSlot {
  cold: boolean;
  child: ChildProcess | null;
  start(): Promise<void>;
  kill(): Promise<void>;
}

function workerSlot(address: string, work: string, cold: boolean, nice: number): WorkerSlot {
  const slot: WorkerSlot = {
    cold,
    child: null,
    start: async () => {
      slot.child = await startWorker(address, work, nice);
    },
    kill: async () => {
      const c = slot.child;
      slot.child = null;
      if (!c || c.exitCode !== null) return;
      const exited = once(c, 'exit');
      c.kill('SIGKILL');
      await exited;
    },
  };
  return slot;
}

/**
 * How long a worker with no cache takes to replay the longest run of `workflowId` (what a task that lost its
 * worker's cache costs): the second of two replays on one bundle, and the run's report signals.
 */
async function replayFigures(
  client: Client,
  workflowId: string,
  saveTo?: string,
): Promise<{ events: number; reports: number; ms: number }> {
  const all = await histories(client, workflowId);
  const h = all.reduce((a, b) => ((b.events?.length ?? 0) > (a.events?.length ?? 0) ? b : a));
  if (saveTo) await writeFile(saveTo, historyToJSON(h));
  const reports = (h.events ?? []).filter(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'report',
  ).length;
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath,
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} },
  });
  let ms = 0;
  for (let i = 0; i < 2; i++) {
    const t0 = performance.now();
    await Worker.runReplayHistory({ workflowBundle, replayName: 'bench-entity-restart' }, h, workflowId);
    ms = performance.now() - t0;
  }
  return { events: h.events?.length ?? 0, reports, ms };
}

async function startWorker(address: string, work: string, nice: number): Promise<ChildProcess> {
  const child = adopt(
    fork(path.join(__dirname, 'force-open', 'worker-child.js'), [address, 'default', TASK_QUEUE, work], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  // A lower priority stands for a busier machine: the worker gets what the rest leaves.
  if (nice && child.pid) setPriority(child.pid, nice);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`worker process exited (${code})`)));
  });
  return child;
}

/** Waits (at most 2 minutes) until the entity's current run has at least `events` events in its history. */
async function untilHistory(client: Client, key: string, events: number): Promise<void> {
  const handle = client.workflow.getHandle(breakerWorkflowId(key));
  const end = Date.now() + 120_000;
  while (Date.now() < end) {
    const { historyLength } = await viewOf(handle).catch(() => ({ historyLength: 0 }));
    if (historyLength >= events) return;
    await sleep(50);
  }
}

/** A fresh entity on `key`, started as a guard starts one (signal-with-start with its first report). */
async function startEntity(client: Client, key: string, o: Opts): Promise<void> {
  const input: EntityInput = {
    key,
    ...(o.maxHistoryEvents ? { options: { maxHistoryEvents: Number(o.maxHistoryEvents) } } : {}),
  };
  await client.workflow.signalWithStart(BREAKER_ENTITY_WORKFLOW, {
    workflowId: breakerWorkflowId(key),
    taskQueue: TASK_QUEUE,
    args: [input],
    signal: reportSignal,
    signalArgs: [{ reporter: 'bench-start', counts: {} }],
  });
  const handle = client.workflow.getHandle(breakerWorkflowId(key));
  const end = Date.now() + 60_000;
  while (!(await viewOf(handle)).view) {
    if (Date.now() > end) throw new Error(`the entity ${key} published no view within 60 s`);
    await sleep(200);
  }
}

/**
 * The backlog case: the worker process is stopped, `n` reports land in the entity's history with nobody to apply
 * them, and the worker starts again: how long its first workflow task (all of them in one activation) takes.
 */
async function backlogOnce(client: Client, key: string, n: number, worker: WorkerSlot, saveTo?: string): Promise<void> {
  const handle = client.workflow.getHandle(breakerWorkflowId(key));
  await worker.kill();
  const ids = Array.from({ length: 60 }, (_, i) => `bench-${i}@${process.pid}`);
  for (let i = 0; i < n; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        handle.signal(reportSignal, report(ids[(i + j) % 60]!, i + j, 8_000)),
      ),
    );
  const { historyLength } = await viewOf(handle);
  const startedAt = Date.now();
  await worker.start();
  const pollingAt = Date.now();
  let doneAt: number | null = null;
  let started: number | null = null;
  let failed = 0;
  let timedOut = 0;
  while (Date.now() - pollingAt < APPLY_LIMIT_MS && doneAt === null) {
    await sleep(250);
    for (const h of await histories(client, breakerWorkflowId(key))) {
      for (const e of h.events ?? []) {
        if (timeOf(e) < pollingAt) continue;
        if (e.workflowTaskStartedEventAttributes && started === null) started = timeOf(e);
        if (e.workflowTaskFailedEventAttributes) failed++;
        if (e.workflowTaskTimedOutEventAttributes) timedOut++;
        if (e.workflowTaskCompletedEventAttributes && doneAt === null) doneAt = timeOf(e);
      }
    }
  }
  console.log(
    `  backlog of ${n} reports (history ${historyLength} events): the worker took ${pollingAt - startedAt} ms to start; first task completed +${doneAt === null ? 'never' : Math.round(doneAt - pollingAt)} ms after, ` +
      `its run's tasks failed ${failed}, timed out ${timedOut}; load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  if (saveTo) await writeFile(saveTo, historyToJSON((await histories(client, breakerWorkflowId(key)))[0]!));
}

async function main(o: Opts): Promise<void> {
  const rate = Number(o.rate);
  const reporters = Number(o.reporters);
  const { cli } = localBinaries();
  if (!cli) throw new Error('bench:entity-restart needs the Temporal CLI: run npm run setup:temporal');
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-entity-restart-'));
  const temporal = await temporalProcess(cli, path.join(work, 'temporal.sqlite'));
  await temporal.start();
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection, namespace: 'default' });
  const worker = workerSlot(temporal.address, work, o.coldWorker, Number(o.workerNice));
  try {
    await worker.start();
    console.log(
      `bench:entity-restart: ${rate} report signals a second from ${reporters} reporters; warm-up ${o.warmup} s, server down ${o.down} s, ${o.restarts} restart(s)` +
        (o.maxHistoryEvents ? `, entity maxHistoryEvents ${o.maxHistoryEvents}` : '') +
        (o.coldWorker ? '; the worker process dies with the server' : '') +
        (Number(o.workerNice) ? `; the worker at nice ${o.workerNice}` : ''),
    );
    let idle: Figures | null = null;
    if (o.idleBaseline) {
      const key = breakerKey('http://idle.bench.invalid/{z}/{x}/{y}.png');
      await startEntity(client, key, o);
      await sleep(2_000);
      idle = await restartOnce(temporal, client, key, Number(o.down) * 1000, 'idle entity (baseline)', worker, o.debug);
    }
    if (Number(o.backlog) > 0) {
      const bkey = breakerKey('http://backlog.bench.invalid/{z}/{x}/{y}.png');
      await startEntity(client, bkey, o);
      await backlogOnce(
        client,
        bkey,
        Number(o.backlog),
        worker,
        o.saveHistory ? `${o.saveHistory}.backlog.json` : undefined,
      );
      if (Number(o.restarts) === 0) return;
    }
    const key = breakerKey('http://loaded.bench.invalid/{z}/{x}/{y}.png');
    await startEntity(client, key, o);
    const load = startLoad(client, key, rate, reporters);
    const runs: Figures[] = [];
    try {
      for (let k = 1; k <= Number(o.restarts); k++) {
        await sleep(Number(k === 1 ? o.warmup : o.settle) * 1000);
        // The worst moment: the run near its history limit (its first task after the restart continues as new).
        await untilHistory(client, key, Number(o.killAtEvents));
        runs.push(
          await restartOnce(temporal, client, key, Number(o.down) * 1000, `restart ${k} under load`, worker, o.debug),
        );
      }
    } finally {
      await load.stop();
    }
    const { sent, failed } = load.counts();
    console.log(`  reports: ${sent} delivered, ${failed} failed or dropped`);
    const ho = handOvers(await histories(client, breakerWorkflowId(key)));
    const q = (p: number) =>
      ho.gapsMs.length
        ? Math.round(ho.gapsMs[Math.min(ho.gapsMs.length - 1, Math.ceil(p * ho.gapsMs.length) - 1)]!)
        : NaN;
    console.log(
      `  continue-as-new: ${ho.n} hand-overs, ${ho.failed} of their tasks failed; gap p50 ${q(0.5)} ms, max ${q(1)} ms (restarts included)`,
    );
    const r = await replayFigures(client, breakerWorkflowId(key), o.saveHistory);
    console.log(
      `  replay of the longest run without a cache: ${r.events} events, ${r.reports} reports, ${Math.round(r.ms)} ms (${(r.ms / Math.max(1, r.reports)).toFixed(2)} ms a report)`,
    );
    const worst = <K extends keyof Figures>(k: K) => Math.max(...runs.map((r) => r[k] ?? Number.POSITIVE_INFINITY));
    const int = (v: number | null | undefined) =>
      v === null || v === undefined || !Number.isFinite(v) ? 'NaN' : String(Math.round(v));
    console.log(
      `restart: rate=${rate} first-task-ms=${int(worst('firstTaskMs'))} applied-ms=${int(worst('appliedMs'))} task-timeouts=${int(worst('taskTimeouts'))} ` +
        `history-events=${int(worst('historyEvents'))} replay-ms=${int(r.ms)} idle-first-task-ms=${int(idle?.firstTaskMs)}`,
    );
  } finally {
    const c = worker.child;
    if (c) {
      c.disconnect();
      if (c.exitCode === null) await Promise.race([once(c, 'exit'), sleep(15_000)]);
      if (c.exitCode === null) c.kill('SIGKILL');
    }
    await connection.close();
    await temporal.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

const program = new Command('bench:entity-restart')
  .option('--rate <n>', 'report signals a second to the entity', '30')
  .option('--reporters <n>', 'reporters the reports come from', '60')
  .option('--warmup <s>', 'seconds of reports before the first restart', '40')
  .option('--down <s>', 'seconds the server stays down', '5')
  .option('--settle <s>', 'seconds of reports between restarts', '20')
  .option('--restarts <n>', 'restarts under load', '3')
  .option('--no-idle-baseline', 'skip the restart of an idle entity first')
  .option('--max-history-events <n>', "the entity's maxHistoryEvents option (default: the entity's own)")
  .option('--save-history <file>', "write the entity's longest run's history there (JSON, as record-history does)")
  .option('--debug', "list the entity's workflow task events after each kill", false)
  .option('--worker-nice <n>', "the worker process's nice value (a busier machine, for the worker)", '0')
  .option('--kill-at-events <n>', "kill the server once the entity's run has this many events (0: at once)", '950')
  .option(
    '--backlog <n>',
    'first, with the worker stopped, send n reports and time the task that applies them all',
    '0',
  )
  .option(
    '--cold-worker',
    'kill the worker process with the server and start it again after (no workflow cache)',
    false,
  )
  .action(async (o: Opts) => main(o));
// Its worker and Temporal server end with it.
endOnSignals(() => Promise.resolve());
void program.parseAsync().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
