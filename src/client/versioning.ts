import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import { packageRoot } from './local-server';
import { finishUpgradeFrom, pinOpenRuns, startsAutoUpgrade } from './upgrade-from-0x';

/**
 * Worker Versioning (Temporal's Worker Deployments) for tilebreaker workers: each worker says which build it
 * runs, and the server sends every task of the task queues (workflow tasks, plans' fetch batches, assemblies,
 * breaker probes) to one build at a time, the deployment's current version. A plan, a signal or a workflow
 * type that a new build makes is then never handled by a worker of the build before it, however long a
 * rolling upgrade mixes them. See docs/upgrading.md.
 */
export interface WorkerVersioning {
  /** The Worker Deployment (default: the task queue's name, `tilebreaker` by default): one per fleet. */
  deploymentName: string;
  /** This build (default `<package version>+<12 hex digits of the compiled code's SHA-256>`). */
  buildId: string;
  /**
   * `auto`: once this worker polls, make its build current if it never was and the current one is of an older
   * release (by the package version in the build id) or unversioned (a rolling upgrade then needs no step of its own). `never`: leave it to an operator (ramps,
   * blue-green, a controller).
   */
  promote: 'auto' | 'never';
}

/**
 * A deployment's current version routes every task queue its builds poll: two fleets on two task queues under
 * one deployment name would move together (or the server would refuse a build that does not poll both). So by
 * default each task queue is a deployment of its own, named after it.
 */
export const defaultDeploymentName = (taskQueue: string): string =>
  taskQueue
    .replace(/[^A-Za-z0-9_+-]/g, '-')
    .replace(/^[^A-Za-z0-9]/, 'x')
    .slice(0, 255);
export const DEPLOYMENT_NAME_ENV = 'TILEBREAKER_DEPLOYMENT_NAME';
export const BUILD_ID_ENV = 'TILEBREAKER_BUILD_ID';
export const VERSIONING_ENV = 'TILEBREAKER_VERSIONING';
export const PROMOTE_ENV = 'TILEBREAKER_PROMOTE';

/**
 * Every workflow is pinned to the build it started on (src/workflows/index.ts declares it for each type; this is
 * the default for any other): a mosaic finishes on its build, and a breaker entity moves at its continue-as-new.
 */
export function deploymentOptions(v: Pick<WorkerVersioning, 'deploymentName' | 'buildId'>): WorkerDeploymentOptions {
  return {
    version: { deploymentName: v.deploymentName, buildId: v.buildId },
    useWorkerVersioning: true,
    defaultVersioningBehavior: 'PINNED',
  };
}

let hashed: string | null = null;

/** 12 hex digits of the SHA-256 of this package's compiled code (dist/src): two builds of one version differ. */
export function buildHash(root: string = path.join(__dirname, '..')): string {
  if (root === path.join(__dirname, '..') && hashed !== null) return hashed;
  const h = createHash('sha256');
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js'))
        h.update(path.relative(root, p)).update('\0').update(readFileSync(p)).update('\0');
    }
  };
  walk(root);
  const digest = h.digest('hex').slice(0, 12);
  if (root === path.join(__dirname, '..')) hashed = digest;
  return digest;
}

/** `<package version>+<build hash>`, the build id a worker reports unless told another. */
export function defaultBuildId(): string {
  const pkg = JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return `${pkg.version}+${buildHash()}`;
}

/** What the server accepts in a deployment name or build id (it joins them with a dot). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_+-]{0,254}$/;
const BUILD = /^[A-Za-z0-9][A-Za-z0-9_+.-]{0,254}$/;

/**
 * The worker command's versioning, from its flags over the environment: null when turned off (`off`, for a
 * server without Worker Deployments, or a fleet run by hand as before).
 */
export function versioningFrom(
  flags: { versioning?: string; deploymentName?: string; buildId?: string; promote?: string },
  taskQueue: string,
  env: NodeJS.ProcessEnv = process.env,
): WorkerVersioning | null {
  const pick = (flag: string | undefined, name: string): string | undefined =>
    flag ?? (env[name] !== undefined && env[name] !== '' ? env[name] : undefined);
  const onOff = pick(flags.versioning, VERSIONING_ENV) ?? 'on';
  if (onOff !== 'on' && onOff !== 'off')
    throw new Error(`--versioning / ${VERSIONING_ENV} must be on or off (got ${JSON.stringify(onOff)})`);
  if (onOff === 'off') return null;
  const deploymentName = pick(flags.deploymentName, DEPLOYMENT_NAME_ENV) ?? defaultDeploymentName(taskQueue);
  if (!NAME.test(deploymentName))
    throw new Error(
      `--deployment-name / ${DEPLOYMENT_NAME_ENV} must be letters, digits, _, + or - (got ${JSON.stringify(deploymentName)})`,
    );
  const buildId = pick(flags.buildId, BUILD_ID_ENV) ?? defaultBuildId();
  if (!BUILD.test(buildId))
    throw new Error(
      `--build-id / ${BUILD_ID_ENV} must be letters, digits, ., _, + or - (got ${JSON.stringify(buildId)})`,
    );
  const promote = pick(flags.promote, PROMOTE_ENV) ?? 'auto';
  if (promote !== 'auto' && promote !== 'never')
    throw new Error(`--promote / ${PROMOTE_ENV} must be auto or never (got ${JSON.stringify(promote)})`);
  return { deploymentName, buildId, promote };
}

// temporal.api.enums.v1 values (@temporalio/proto is not a direct dependency).
const TASK_QUEUE_TYPE_WORKFLOW = 1;
const TASK_QUEUE_TYPE_ACTIVITY = 2;

export type PromoteOutcome =
  /** From a 0.x build (upgrade-from-0x.ts): the runs pinned to it, the breaker entities moved off it. */
  | { promoted: true; previous: string; pinned?: number; moved?: string[]; moveError?: string }
  | {
      promoted: false;
      why: 'already current' | 'was current before' | 'ramping' | 'newer current' | 'not newer' | 'stopped';
    }
  | { promoted: false; why: 'timed out'; lastError: string | null };

/** A build id's package version, `<major>.<minor>.<patch>[-<pre-release>]` before any `+`: null when it has none. */
function releaseOf(buildId: string): { core: number[]; pre: string[] } | null {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$/.exec(buildId);
  return m ? { core: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] ? m[4].split('.') : [] } : null;
}

/**
 * How build `a`'s release compares with `b`'s by semantic-version precedence (negative: older), or null when
 * either id carries no version (an id of the operator's own). Two builds of one version compare 0.
 */
export function compareReleases(a: string, b: string): number | null {
  const x = releaseOf(a);
  const y = releaseOf(b);
  if (!x || !y) return null;
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i]! - y.core[i]!;
  // A pre-release comes before its release; identifiers compare numerically when both are numbers.
  if (x.pre.length === 0 || y.pre.length === 0) return y.pre.length - x.pre.length;
  for (let i = 0; i < Math.min(x.pre.length, y.pre.length); i++) {
    const [p, q] = [x.pre[i]!, y.pre[i]!];
    if (p === q) continue;
    const [np, nq] = [/^\d+$/.test(p), /^\d+$/.test(q)];
    if (np && nq) return Number(p) - Number(q);
    if (np !== nq) return np ? -1 : 1;
    return p < q ? -1 : 1;
  }
  return x.pre.length - y.pre.length;
}

/**
 * Makes this worker's build the deployment's current version once it polls every queue it serves, if it never
 * was current before and the current version is unversioned or of an older release than this build's (by the
 * package version its build id carries, not by when the server first saw it: an old release's worker that
 * polls late is still old). So a rolling upgrade moves the fleet's work to the new release as its first worker
 * is up, a worker of the old release that restarts meanwhile takes nothing back, and a rollback an operator
 * made (setting an older or no version current) is never undone by a worker of the build rolled back from,
 * which was current before. Two builds of one version, or ids without one, are the operator's to order.
 */
export async function promoteWhenPolling(
  client: Client,
  v: Pick<WorkerVersioning, 'deploymentName' | 'buildId'>,
  queues: { workflow: string[]; activity: string[] },
  opts: { signal?: AbortSignal; timeoutMs?: number; identity?: string } = {},
): Promise<PromoteOutcome> {
  const svc = client.workflowService;
  const namespace = client.options.namespace;
  const until = Date.now() + (opts.timeoutMs ?? 120_000);
  const wanted = [
    ...queues.workflow.map((name) => `${TASK_QUEUE_TYPE_WORKFLOW}:${name}`),
    ...queues.activity.map((name) => `${TASK_QUEUE_TYPE_ACTIVITY}:${name}`),
  ];
  let lastError: string | null = null;
  for (;;) {
    if (opts.signal?.aborted) return { promoted: false, why: 'stopped' };
    if (Date.now() > until) return { promoted: false, why: 'timed out', lastError };
    try {
      const version = await svc.describeWorkerDeploymentVersion({
        namespace,
        deploymentVersion: { deploymentName: v.deploymentName, buildId: v.buildId },
      });
      const have = new Set(
        (version.workerDeploymentVersionInfo?.taskQueueInfos ?? []).map((q) => `${q.type ?? 0}:${q.name ?? ''}`),
      );
      if (wanted.every((q) => have.has(q))) {
        const d = await svc.describeWorkerDeployment({ namespace, deploymentName: v.deploymentName });
        const info = d.workerDeploymentInfo;
        const routing = info?.routingConfig;
        const summaries = info?.versionSummaries ?? [];
        const mine = summaries.find((s) => s.deploymentVersion?.buildId === v.buildId);
        const current = routing?.currentDeploymentVersion?.buildId ?? null;
        if (current === v.buildId) return { promoted: false, why: 'already current' };
        // The deployment's summary may lag the version's own description: whether this build was current is
        // not known until it is listed, so look again (until the timeout).
        if (!mine) throw new Error(`build ${v.buildId} is not yet listed in deployment ${v.deploymentName}`);
        // Never current or ramping: INACTIVE (1), or a server that does not say.
        if (mine.firstActivationTime || Number(mine.status ?? 0) > 1)
          return { promoted: false, why: 'was current before' };
        if (routing?.rampingDeploymentVersion?.buildId) return { promoted: false, why: 'ramping' };
        if (current !== null) {
          const order = compareReleases(v.buildId, current);
          if (order === null || order === 0) return { promoted: false, why: 'not newer' };
          if (order < 0) return { promoted: false, why: 'newer current' };
        }
        return await takeOver(client, v, current, d.conflictToken, opts.identity ?? `tilebreaker-worker ${v.buildId}`);
      }
    } catch (err) {
      // Not there yet (the server records a version at its first poll), or a race with another worker's
      // promotion (the conflict token): look again.
      if (opts.signal?.aborted) return { promoted: false, why: 'stopped' };
      lastError = err instanceof Error ? err.message : String(err);
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 500);
      opts.signal?.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

/**
 * Makes `v` the deployment's current version in place of `current`. Runs of a 0.x build are pinned to it first,
 * and its breaker entities moved once this build is current (upgrade-from-0x.ts).
 */
async function takeOver(
  client: Client,
  v: Pick<WorkerVersioning, 'deploymentName' | 'buildId'>,
  current: string | null,
  conflictToken: Uint8Array | null | undefined,
  identity: string,
): Promise<PromoteOutcome> {
  const old = current !== null && startsAutoUpgrade(current) && !startsAutoUpgrade(v.buildId) ? current : null;
  const pinned = old ? await pinOpenRuns(client, { deploymentName: v.deploymentName, buildId: old }, identity) : 0;
  await client.workflowService.setWorkerDeploymentCurrentVersion({
    namespace: client.options.namespace,
    deploymentName: v.deploymentName,
    buildId: v.buildId,
    ...(conflictToken ? { conflictToken } : {}),
    identity,
  });
  if (!old) return { promoted: true, previous: current ?? 'unversioned' };
  // Now current: a failure from here on is retried here, not by the caller (which would find this build current).
  let moveError = '';
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const moved = await finishUpgradeFrom(client, { deploymentName: v.deploymentName, buildId: old }, identity);
      return { promoted: true, previous: old, pinned, moved };
    } catch (err) {
      moveError = err instanceof Error ? err.message : String(err);
      await new Promise((r) => setTimeout(r, 1_000 * attempt));
    }
  }
  return { promoted: true, previous: old, pinned, moved: [], moveError };
}
