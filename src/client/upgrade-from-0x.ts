import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { migratePolicyState, type TransitionRecord } from '../breaker';
import {
  BREAKER_ENTITY_WORKFLOW,
  statusQuery,
  transitionsQuery,
  type BreakerEntityWorkflow,
  type BreakerStatus,
  type CarriedState,
  type EntityInput,
} from '../messages/breaker';

/**
 * Moving a fleet from a 0.x release to 1.x. Runs started by 0.x are auto-upgrade: made current, a 1.x build
 * would receive their next workflow tasks and replay 0.x histories, which 1.x (without the 0.x patches) cannot.
 * So, before 1.x becomes current, every open run of the 0.x build is pinned to it by a versioning override
 * (continue-as-new runs and children inherit it): mosaics, seeds and blocks finish on the 0.x workers. A breaker
 * entity would stay there for ever (every continue-as-new inherits the override), so once 1.x is current each
 * 0.x entity is replaced by a 1.x run carrying its state, as its own queries tell it. Nothing of a 0.x history
 * is ever replayed by 1.x. See docs/upgrading.md.
 */

/** temporal.api.workflow.v1.VersioningOverride.PinnedOverrideBehavior.PINNED_OVERRIDE_BEHAVIOR_PINNED */
const PINNED_OVERRIDE = 1;
/** temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED */
const ROUTING_COMPLETED = 2;

export interface Build {
  deploymentName: string;
  buildId: string;
}

/** Whether runs of `buildId` need pinning before a newer build takes over: a 0.x release's (or unknown: no). */
export function startsAutoUpgrade(buildId: string): boolean {
  return /^0\.\d+\.\d+(?:[-+]|$)/.test(buildId);
}

const versionQuery = (b: Build) =>
  `TemporalWorkerDeploymentVersion = "${b.deploymentName}:${b.buildId}" AND ExecutionStatus = "Running"`;

/** Pins every open run of build `old` to it (a versioning override); returns how many it pinned. */
export async function pinOpenRuns(client: Client, old: Build, identity: string): Promise<number> {
  let n = 0;
  for await (const wf of client.workflow.list({ query: versionQuery(old) })) {
    await client.workflowService.updateWorkflowExecutionOptions({
      namespace: client.options.namespace,
      workflowExecution: { workflowId: wf.workflowId, runId: wf.runId },
      workflowExecutionOptions: {
        versioningOverride: {
          pinned: { behavior: PINNED_OVERRIDE, version: { deploymentName: old.deploymentName, buildId: old.buildId } },
        },
      },
      updateMask: { paths: ['versioning_override'] },
      identity,
    });
    n++;
  }
  return n;
}

/** Waits until a change of the deployment's current version has reached every task queue. */
export async function routingSettled(client: Client, deploymentName: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const d = await client.workflowService.describeWorkerDeployment({
      namespace: client.options.namespace,
      deploymentName,
    });
    if (Number(d.workerDeploymentInfo?.routingConfigUpdateState ?? ROUTING_COMPLETED) === ROUTING_COMPLETED) return;
    if (Date.now() > until) throw new Error(`the routing of deployment ${deploymentName} did not settle`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * After a 0.x build stopped being current: pins any run it started meanwhile (a task it already failed on the
 * new build is retried on its own), then moves its breaker entities. Returns the entities moved.
 */
export async function finishUpgradeFrom(client: Client, old: Build, identity: string): Promise<string[]> {
  await routingSettled(client, old.deploymentName);
  await pinOpenRuns(client, old, identity);
  return moveEntities(client, old);
}

/**
 * Moves every open breaker entity of build `old` to the deployment's current build: its state read by its own
 * queries (answered by `old`'s workers), then a new run started on the current build with that state carried,
 * the old run terminated by the same start (atomically). Returns the entities moved.
 */
export async function moveEntities(client: Client, old: Build): Promise<string[]> {
  const moved: string[] = [];
  const query = `WorkflowType = "${BREAKER_ENTITY_WORKFLOW}" AND ${versionQuery(old)}`;
  for await (const wf of client.workflow.list({ query })) {
    const handle = client.workflow.getHandle<BreakerEntityWorkflow>(wf.workflowId, wf.runId);
    // The run's start input (its entity options) is its history's first event: one event read, not the history.
    const [status, log, first] = await Promise.all([
      handle.query(statusQuery),
      handle.query(transitionsQuery),
      client.workflowService.getWorkflowExecutionHistory({
        namespace: client.options.namespace,
        execution: { workflowId: wf.workflowId, runId: wf.runId },
        maximumPageSize: 1,
      }),
    ]);
    const started = first.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    const input = started ? defaultPayloadConverter.fromPayload<EntityInput>(started) : null;
    await client.workflow.start<BreakerEntityWorkflow>(BREAKER_ENTITY_WORKFLOW, {
      workflowId: wf.workflowId,
      taskQueue: wf.taskQueue,
      args: [
        {
          key: status.key,
          ...(status.probe ? { probe: status.probe } : {}),
          ...(input?.options ? { options: input.options } : {}),
          carried: carriedFromStatus(status, log),
        },
      ],
      memo: { view: status.view },
      workflowIdConflictPolicy: 'TERMINATE_EXISTING',
    });
    moved.push(wf.workflowId);
  }
  return moved;
}

/**
 * What a run of this release carries, from what a 0.x entity's queries tell (its status and transition log):
 * the policy state but its window (outcome counts restart; an open breaker needs none), and a held probe token
 * under a request id of its own (its holder's result, matched by generation, still counts).
 */
export function carriedFromStatus(status: BreakerStatus, log: TransitionRecord[]): CarriedState {
  const v = status.view;
  const policy = migratePolicyState({
    version: 1,
    config: status.config,
    mode: v.mode,
    forcedUntil: v.forcedUntil,
    phase: v.phase,
    window: [],
    openedAt: status.openedAt,
    cooldownUntil: v.cooldownUntil,
    consecutiveOpens: status.consecutiveOpens,
    // The last close: a move into closed (a configure or a declined trip is logged closed to closed).
    closedAt: log.find((t) => t.to === 'closed' && t.from !== 'closed')?.at ?? null,
    rampStartedAt: v.rampStartedAt,
    probes: status.probes.map((p) => ({ ...p, requestId: `moved/${p.generation}` })),
    lastGeneration: v.generation,
    probeSuccesses: status.probeSuccesses,
    ...(status.probeFailures !== undefined ? { probeFailures: status.probeFailures } : {}),
    ...(status.failedTrials !== undefined ? { failedTrials: status.failedTrials } : {}),
    retryAfterHintUntil: null,
    pacedUntil: v.pacedUntil ?? null,
  });
  // An operator's configure or force keeps an idle entity from ending: assume one made any change on record.
  const operator = log.some((t) => t.reason === 'configured' || t.actor !== undefined || t.sender !== undefined);
  return {
    policy,
    log,
    lastReportAt: status.lastReportAt,
    lastTransitionAt: log[0]?.at ?? 0,
    decisions: [],
    counters: status.counters,
    searchAttributesOn: status.searchAttributes ?? false,
    ...(operator ? { operatorSet: true } : {}),
  };
}
