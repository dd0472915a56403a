/**
 * The upgrade from release 0.1.0 (built from git, see helpers/previous-release.ts) to this one, on one dev
 * server: a fleet of 0.1.0 with a mosaic in flight and an open breaker; a worker of this build starts and makes
 * itself current (pinning 0.1.0's open runs first, then moving the breaker entity); the 0.1.0 worker finishes
 * its mosaic, drains and stops. Every wait is bounded; the assertions are on outcomes (the manifest, the
 * histories, the deployment's routing, the entity's state), not on timings.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { breakerKey } from '../../src/breaker/key';
import { breakerStatus } from '../../src/client/breakers';
import { startMosaic } from '../../src/client/mosaics';
import { defaultBuildId, defaultDeploymentName } from '../../src/client/versioning';
import { startDemoTileServer } from '../../src/demo/tile-server';
import { transitionsQuery } from '../../src/messages/breaker';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { assertAccounted, readManifest, tileBoxRequest } from '../helpers/mosaic';
import { buildRelease, RELEASE_0_1_0, type ReleaseBuild } from '../helpers/previous-release';
import { devServerEnv, uniqueTaskQueue } from '../helpers/temporal-env';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-upgrade-'));
let env: TestWorkflowEnvironment;
let old: ReleaseBuild;
const cleanups: (() => Promise<void> | void)[] = [];
// A breaker that opens within a few failures and stays open through the outage (its probes fail).
const breakerFile = path.join(dir, 'breaker.json');
writeFileSync(breakerFile, JSON.stringify({ minSamples: 4, fastMinSamples: 4, cooldownMs: 2_000, rampMs: 500 }));

before(async () => {
  // Fails (never skips) when the commit is not in the clone: see buildRelease.
  old = buildRelease(RELEASE_0_1_0);
  console.log(old.buildMs ? `built ${old.commit} in ${(old.buildMs / 1000).toFixed(1)} s` : `0.1.0: cached build`);
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
});
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await env?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

async function waitFor(what: string, ms: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const until = Date.now() + ms;
  while (!(await Promise.resolve(check()).catch(() => false))) {
    if (Date.now() > until) throw new Error(`${what}: not within ${ms / 1000} s`);
    await delay(200);
  }
}

function worker(cli: string | undefined, taskQueue: string): WorkerProcess {
  const w = startWorkerProcess(
    env.address,
    env.namespace ?? 'default',
    taskQueue,
    {},
    { args: ['--breaker-config', breakerFile], ...(cli ? { cli } : {}) },
  );
  cleanups.push(async () => {
    w.child.kill('SIGKILL');
    await w.exited;
  });
  return w;
}

async function currentBuild(taskQueue: string): Promise<string | null> {
  const d = await env.client.workflowService.describeWorkerDeployment({
    namespace: env.namespace ?? 'default',
    deploymentName: defaultDeploymentName(taskQueue),
  });
  return d.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId ?? null;
}

/** The build a workflow's tasks go to, and whether an override pins it there. */
async function placement(workflowId: string): Promise<{ buildId: string | null; override: boolean }> {
  const d = await env.client.workflow.getHandle(workflowId).describe();
  const v = d.raw.workflowExecutionInfo?.versioningInfo;
  return { buildId: v?.deploymentVersion?.buildId ?? null, override: Boolean(v?.versioningOverride) };
}

interface Facts {
  /** Workflow tasks and fetch batches started, by worker identity. */
  tasks: string[];
  batches: string[];
  /** Workflow tasks failed, but not by a reset (which records one). */
  failures: string[];
}

/** temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW */
const RESET_CAUSE = 20;

async function facts(workflowId: string): Promise<Facts> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const out: Facts = { tasks: [], batches: [], failures: [] };
  const types = new Map<string, string>();
  for (const e of events) {
    if (e.workflowTaskStartedEventAttributes) out.tasks.push(e.workflowTaskStartedEventAttributes.identity ?? '?');
    const f = e.workflowTaskFailedEventAttributes;
    if (f && Number(f.cause) !== RESET_CAUSE) out.failures.push(`${String(f.cause)}: ${f.failure?.message ?? ''}`);
    if (e.activityTaskScheduledEventAttributes)
      types.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
    const st = e.activityTaskStartedEventAttributes;
    if (st && types.get(String(st.scheduledEventId)) === 'fetchMosaicBatch') out.batches.push(st.identity ?? '?');
  }
  return out;
}

const on = (who: string[], w: WorkerProcess) => who.filter((id) => id.startsWith(w.identityPrefix)).length;

test(
  `upgrade from 0.1.0 (${RELEASE_0_1_0}): a fleet with a mosaic in flight and an open breaker; this build takes over, 0.1.0 finishes its mosaic and drains`,
  { timeout: 480_000 },
  async () => {
    // Down from the 80th request for 40 s: the breaker opens and its probes fail while the fleet changes.
    const server = await startDemoTileServer({ latencyMs: 100, outageAfterRequests: 80, outageMs: 40_000 });
    cleanups.push(() => server.close());
    const taskQueue = uniqueTaskQueue('upgrade-0-1-0');
    const w0 = worker(old.cli, taskQueue);
    await w0.ready;
    await waitFor('0.1.0 makes itself current', 60_000, async () => (await currentBuild(taskQueue)) !== null);
    const oldBuild = (await currentBuild(taskQueue))!;
    assert.match(oldBuild, /^0\.1\.0\+/);

    const request = tileBoxRequest(
      server,
      dir,
      'upgrade',
      { cols: 20, rows: 20 },
      { batchSize: 16, parallelBatches: 2, fallback: 'wait', deadline: '10m' },
    );
    const handle = await startMosaic(env.client, taskQueue, request, `upgrade-${process.pid}`);
    const key = breakerKey(server.template);
    const entityId = `breaker/${key}`;
    await waitFor(
      'the outage opens the breaker',
      90_000,
      async () => server.stats.outages.length > 0 && (await breakerStatus(env.client, key)).view.state !== 'closed',
    );
    const okAtSwitch = server.stats.ok;

    // This build's worker: once it polls, it pins 0.1.0's open runs, makes itself current and moves the entity.
    const w1 = worker(undefined, taskQueue);
    await w1.ready;
    await waitFor(
      'this build becomes current',
      90_000,
      async () => (await currentBuild(taskQueue)) === defaultBuildId(),
    );
    await waitFor('the entity runs on this build, unpinned', 90_000, async () => {
      const p = await placement(entityId);
      return p.buildId === defaultBuildId() && !p.override;
    });
    const mosaicAt = await placement(handle.workflowId);
    assert.deepEqual(mosaicAt, { buildId: oldBuild, override: true }, 'the mosaic stays pinned to 0.1.0');

    // The breaker is still open on this build, with its history: the open that 0.1.0 recorded is in its log.
    const moved = await breakerStatus(env.client, key);
    assert.notEqual(moved.view.state, 'closed', `the moved breaker is ${moved.view.state}`);
    const log = await env.client.workflow.getHandle(entityId).query(transitionsQuery);
    assert.ok(
      log.some((t) => t.to === 'open' && t.from === 'closed'),
      `the log holds the open: ${JSON.stringify(log.map((t) => `${t.from}>${t.to} ${t.reason}`))}`,
    );

    const result = await handle.result();
    const m = readManifest(result);
    assert.equal(assertAccounted(m), null, 'every planned tile is in the manifest once');
    assert.equal(m.counts.ok, 400, `every tile ok: ${JSON.stringify(m.counts)}`);
    // The 0.1.0 worker drains: its mosaic is done, so it stops; the entity goes on answering on this build.
    w0.child.kill('SIGTERM');
    await w0.exited;
    const after = await breakerStatus(env.client, key);
    assert.ok(after.view.state, 'the entity answers with the 0.1.0 worker gone');

    const mosaic = await facts(handle.workflowId);
    const entity = await facts(entityId);
    console.log(
      `upgrade: ${okAtSwitch} of 400 tiles before the switch; batches ${on(mosaic.batches, w0)} on 0.1.0, ${on(mosaic.batches, w1)} on this build; ` +
        `entity tasks on this build ${on(entity.tasks, w1)}; requests while down ${server.stats.whileDown}`,
    );
    assert.ok(okAtSwitch > 0 && okAtSwitch < 400, `the mosaic was in flight at the switch (${okAtSwitch} tiles)`);
    assert.equal(on(mosaic.tasks, w1), 0, "no task of the mosaic's went to this build");
    assert.equal(on(mosaic.batches, w1), 0, "no batch of the mosaic's went to this build");
    assert.ok(on(entity.tasks, w1) > 0, 'the entity runs on this build');
    assert.deepEqual([...mosaic.failures, ...entity.failures], [], 'no workflow task failed');
  },
);
