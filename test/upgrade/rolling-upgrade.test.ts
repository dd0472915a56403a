/**
 * A rolling upgrade from the previous release (built from git, see helpers/previous-release.ts) to this one,
 * and the rollback, on one dev server: a mosaic and a breaker entity in flight while a worker of one build
 * replaces a worker of the other. Every wait is bounded; the assertions are on outcomes (the manifest, the
 * workflows' status and histories, the deployment's routing), not on timings.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { breakerKey } from '../../src/breaker/key';
import { breakerStatus } from '../../src/client/breakers';
import { localBinaries } from '../../src/client/local-server';
import { startMosaic } from '../../src/client/mosaics';
import { defaultBuildId, defaultDeploymentName } from '../../src/client/versioning';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest, tileBoxRequest } from '../helpers/mosaic';
import { buildRelease, PREVIOUS_RELEASE, type ReleaseBuild } from '../helpers/previous-release';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-upgrade-'));
let env: TestWorkflowEnvironment;
let previous: ReleaseBuild;
const cleanups: (() => Promise<void> | void)[] = [];
// A breaker that opens within a few failures and cools down in a second, for every entity these workers create.
const breakerFile = path.join(dir, 'breaker.json');
writeFileSync(
  breakerFile,
  JSON.stringify({ minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 }),
);

before(async () => {
  // Fails (never skips) when the commit is not in the clone: see buildRelease.
  previous = buildRelease(PREVIOUS_RELEASE);
  console.log(
    previous.buildMs
      ? `built ${previous.commit} in ${(previous.buildMs / 1000).toFixed(1)} s (${previous.dir})`
      : `previous release ${previous.commit}: cached build in ${previous.dir}`,
  );
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
});
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

async function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: not within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(t);
  }
}

async function waitFor(what: string, ms: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!(await Promise.resolve(check()).catch(() => false))) {
    if (Date.now() > until) throw new Error(`${what}: not within ${ms / 1000} s`);
    await delay(200);
  }
}

type Build = 'previous' | 'this';

function worker(build: Build, taskQueue: string): WorkerProcess {
  const w = startWorkerProcess(
    env.address,
    env.namespace ?? 'default',
    taskQueue,
    {},
    { args: ['--breaker-config', breakerFile], ...(build === 'previous' ? { cli: previous.cli } : {}) },
  );
  cleanups.push(async () => {
    w.child.kill('SIGKILL');
    await w.exited;
  });
  return w;
}

/** SIGTERM, as an orchestrator stops a pod: the worker drains and exits. */
async function stop(w: WorkerProcess): Promise<void> {
  w.child.kill('SIGTERM');
  await within('the stopped worker exits', 60_000, w.exited);
}

/** The build the deployment routes to now (null: unversioned workers). */
async function currentBuild(taskQueue: string): Promise<string | null> {
  const d = await env.client.workflowService.describeWorkerDeployment({
    namespace: env.namespace ?? 'default',
    deploymentName: defaultDeploymentName(taskQueue),
  });
  return d.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId ?? null;
}

/** 20 x 20 zoom-12 tiles, one request each at 100 ms, waiting out the breaker (everything ends ok). */
function request(s: DemoTileServer, name: string): MosaicRequest {
  return tileBoxRequest(
    s,
    dir,
    name,
    { cols: 20, rows: 20 },
    { batchSize: 16, parallelBatches: 2, fallback: 'wait', deadline: '10m' },
  );
}

interface HistoryFacts {
  /** Workflow tasks and fetch batches started, by worker identity. */
  workflowTasks: Map<string, number>;
  batches: Map<string, number>;
  workflowTaskFailures: string[];
  /** The identity of the worker each failed workflow task was on, in the same order. */
  workflowTaskFailedOn: string[];
  scheduleToStartTimeouts: number;
}

async function historyFacts(workflowId: string): Promise<HistoryFacts> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const facts: HistoryFacts = {
    workflowTasks: new Map(),
    batches: new Map(),
    workflowTaskFailures: [],
    workflowTaskFailedOn: [],
    scheduleToStartTimeouts: 0,
  };
  const types = new Map<string, string>();
  const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const e of events) {
    if (e.workflowTaskStartedEventAttributes)
      bump(facts.workflowTasks, e.workflowTaskStartedEventAttributes.identity ?? '?');
    if (e.workflowTaskFailedEventAttributes) {
      facts.workflowTaskFailures.push(
        `${String(e.workflowTaskFailedEventAttributes.cause)}: ${e.workflowTaskFailedEventAttributes.failure?.message ?? ''}`,
      );
      facts.workflowTaskFailedOn.push(e.workflowTaskFailedEventAttributes.identity ?? '?');
    }
    if (e.activityTaskScheduledEventAttributes)
      types.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
    const st = e.activityTaskStartedEventAttributes;
    if (st && types.get(String(st.scheduledEventId)) === 'fetchMosaicBatch') bump(facts.batches, st.identity ?? '?');
    if (Number(e.activityTaskTimedOutEventAttributes?.failure?.timeoutFailureInfo?.timeoutType) === 2)
      facts.scheduleToStartTimeouts++;
  }
  return facts;
}

const by = (m: Map<string, number>, w: WorkerProcess) =>
  [...m.entries()].filter(([who]) => who.startsWith(w.identityPrefix)).reduce((a, [, k]) => a + k, 0);

/** Nondeterminism, as the server records a workflow task failed by replay (the cause's enum name or number). */
const NONDETERMINISM = /^(24|NonDeterministic|WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR)/;

/**
 * A mosaic with an outage in it, started on `from`'s worker; once its breaker is open (the entity in flight)
 * and `from` has fetched a part of it, `switchTo` starts a worker of the other build and moves the
 * deployment's routing to it, and `from`'s worker is stopped. Without `rollForward`, the mosaic must finish on
 * the other worker with every tile ok, and neither the mosaic nor the entity may have failed a workflow task.
 * With it, the workflows must park on the other build (their histories carry workflow code it lacks: every
 * task failure is nondeterminism, on that build), until `rollForward` moves the routing back to a worker that
 * finishes the mosaic with every tile ok.
 */
async function handOver(
  label: string,
  from: Build,
  switchTo: (taskQueue: string) => Promise<WorkerProcess>,
  rollForward?: (taskQueue: string) => Promise<WorkerProcess>,
): Promise<{ taskQueue: string; result: MosaicResult }> {
  const server = await startDemoTileServer({ latencyMs: 100, outageAfterRequests: 80, outageMs: 10_000 });
  cleanups.push(() => server.close());
  const taskQueue = uniqueTaskQueue(label);
  const first = worker(from, taskQueue);
  await within(`the ${from} build's worker starts`, 60_000, first.ready);
  if (from === 'this')
    await waitFor(
      "this build's worker makes itself current",
      60_000,
      async () => (await currentBuild(taskQueue)) === defaultBuildId(),
    );
  const handle = await startMosaic(env.client, taskQueue, request(server, label), `${label}-${process.pid}`);
  const key = breakerKey(server.template);
  // In flight: tiles fetched by the first worker, the outage on, the entity running with its breaker open.
  await waitFor(
    'the outage opens the breaker',
    90_000,
    async () => server.stats.outages.length > 0 && (await breakerStatus(env.client, key)).view.state !== 'closed',
  );
  const okAtSwitch = server.stats.ok;
  const switched = await switchTo(taskQueue);
  await stop(first);
  let second = switched;
  if (rollForward) {
    // Parked: the mosaic's and the entity's next workflow tasks fail on the build switched to, and are retried.
    await waitFor('the mosaic and the entity park on the build switched to', 120_000, async () => {
      const [m, e] = await Promise.all([historyFacts(handle.workflowId), historyFacts(`breaker/${key}`)]);
      return m.workflowTaskFailures.length > 0 && e.workflowTaskFailures.length > 0;
    });
    second = await rollForward(taskQueue);
    await stop(switched);
  }
  const result = await within('the mosaic finishes after the switch', 240_000, handle.result()).catch(
    async (err: unknown) => {
      // Say why: a workflow task failing on the build switched to (nondeterminism, an unknown type) is the usual cause.
      const facts = await Promise.all([historyFacts(handle.workflowId), historyFacts(`breaker/${key}`)]).catch(
        () => null,
      );
      const failures = facts
        ? [...new Set([...facts[0].workflowTaskFailures, ...facts[1].workflowTaskFailures].map((f) => f.slice(0, 300)))]
        : ['(histories unreadable)'];
      throw new Error(
        `${err instanceof Error ? err.message : String(err)}; workflow task failures (mosaic, entity): ${JSON.stringify(failures)}`,
      );
    },
  );

  const m = readManifest(result);
  assert.equal(assertAccounted(m), null, 'every planned tile is in the manifest once');
  assert.equal(m.counts.ok, 400, `every tile ok: ${JSON.stringify(m.counts)}`);
  assert.equal(m.partial, false);
  const mosaic = await historyFacts(handle.workflowId);
  const entity = await historyFacts(`breaker/${key}`);
  console.log(
    `${label}: ${okAtSwitch} of 400 tiles fetched before the switch; fetch batches ${by(mosaic.batches, first)} on the ${from} build, ${by(mosaic.batches, second)} on the other; ` +
      `entity workflow tasks ${by(entity.workflowTasks, first)} / ${by(entity.workflowTasks, second)}; outages ${server.stats.outages.length}, requests while down ${server.stats.whileDown}`,
  );
  assert.ok(okAtSwitch > 0 && okAtSwitch < 400, `the mosaic was in flight at the switch (${okAtSwitch} tiles fetched)`);
  assert.ok(by(mosaic.batches, first) > 0, 'the first worker ran fetch batches');
  assert.ok(by(mosaic.batches, second) > 0, 'the second worker ran fetch batches');
  assert.ok(by(mosaic.workflowTasks, second) > 0, "the mosaic's workflow moved to the second worker");
  assert.ok(
    by(entity.workflowTasks, first) > 0 && by(entity.workflowTasks, second) > 0,
    'the breaker entity ran on both workers',
  );
  if (rollForward) {
    const failed = [...mosaic.workflowTaskFailures, ...entity.workflowTaskFailures];
    const on = [...mosaic.workflowTaskFailedOn, ...entity.workflowTaskFailedOn];
    assert.ok(
      failed.length > 0 && failed.every((f) => NONDETERMINISM.test(f)),
      `parked by nondeterminism alone: ${JSON.stringify(failed.slice(0, 4))}`,
    );
    assert.ok(
      on.every((who) => who.startsWith(switched.identityPrefix)),
      `every failed task was on the build rolled back to: ${JSON.stringify(on)}`,
    );
  } else
    assert.deepEqual(
      [...mosaic.workflowTaskFailures, ...entity.workflowTaskFailures],
      [],
      'no workflow task failed (no nondeterminism, no unknown type)',
    );
  assert.equal(
    mosaic.scheduleToStartTimeouts,
    0,
    'every batch on the fetch queue was taken by a worker of the routed build',
  );
  const d = await env.client.workflow.getHandle(`breaker/${key}`).describe();
  assert.ok(d.status.name === 'RUNNING' || d.status.name === 'COMPLETED', `the entity is ${d.status.name}`);
  return { taskQueue, result };
}

test(
  `rolling upgrade: a worker of the previous release (${PREVIOUS_RELEASE}) replaced by one of this build, a mosaic and a breaker in flight`,
  { timeout: 420_000 },
  async () => {
    const { taskQueue } = await handOver('upgrade', 'previous', async (tq) => {
      const next = worker('this', tq);
      await within("this build's worker starts", 60_000, next.ready);
      // No operator step: the new build makes itself current once it polls both queues.
      await waitFor(
        "this build's worker makes itself current",
        60_000,
        async () => (await currentBuild(tq)) === defaultBuildId(),
      );
      return next;
    });
    assert.equal(await currentBuild(taskQueue), defaultBuildId());
  },
);

test(
  'rollback: this build replaced by the previous release, the routing set back to unversioned workers as docs/upgrading.md says; workflows that ran this build park until the roll forward',
  { timeout: 540_000 },
  async () => {
    const { cli } = localBinaries();
    assert.ok(cli, 'the Temporal CLI (scripts/setup-temporal.sh)');
    const setCurrent = (tq: string, to: string[]) =>
      execFileSync(
        cli,
        [
          'worker',
          'deployment',
          'set-current-version',
          '--deployment-name',
          defaultDeploymentName(tq),
          ...to,
          '--yes',
          '--address',
          env.address,
          '--namespace',
          env.namespace ?? 'default',
        ],
        { stdio: 'pipe' },
      );
    let forward: WorkerProcess | undefined;
    const { taskQueue } = await handOver(
      'rollback',
      'this',
      async (tq) => {
        const back = worker('previous', tq);
        await within("the previous release's worker starts", 60_000, back.ready);
        // The documented rollback: the deployment's routing back to unversioned workers.
        setCurrent(tq, ['--unversioned']);
        assert.equal(await currentBuild(tq), null);
        return back;
      },
      // This build's workflow code (its patches) is more than the previous release can replay: the in-flight
      // mosaic and entity wait, nothing lost, until the documented roll forward moves the routing back.
      async (tq) => {
        forward = worker('this', tq);
        await within("this build's worker starts for the roll forward", 60_000, forward.ready);
        setCurrent(tq, ['--build-id', defaultBuildId()]);
        assert.equal(await currentBuild(tq), defaultBuildId());
        return forward;
      },
    );
    // Rolled back again: a worker of the build rolled back from that starts again (a crash loop, a stale
    // replica) takes nothing back: its build was current before, so it does not promote itself.
    setCurrent(taskQueue, ['--unversioned']);
    if (forward) await stop(forward);
    const again = worker('this', taskQueue);
    await within("this build's worker starts again", 60_000, again.ready);
    await waitFor("this build's worker polls again", 60_000, async () => {
      const q = await env.client.workflowService.describeTaskQueue({
        namespace: env.namespace ?? 'default',
        taskQueue: { name: `${taskQueue}-fetch`, kind: 1 },
        taskQueueType: 2,
      });
      return (q.pollers ?? []).some((p) => p.identity?.startsWith(again.identityPrefix));
    });
    await delay(3_000);
    assert.equal(await currentBuild(taskQueue), null, 'the rollback stands');
    await stop(again);
  },
);
