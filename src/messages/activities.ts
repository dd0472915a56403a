/**
 * The activities the workflows schedule, as they call them: what `proxyActivities` is typed with. Types
 * only, so workflow code never reaches activity code; the worker's activities (src/activities/index.ts)
 * are checked against them when they are built.
 */
import type { BreakerStateName } from '../breaker';
import type { ProbeOutcome, ProbeSpec } from './breaker';
import type { PackMbtilesInput, PackMbtilesResult } from './seed-types';
import type {
  AssembleInput,
  DeadLetters,
  MosaicBatchInput,
  MosaicBatchSummary,
  MosaicPlan,
  MosaicRequest,
  MosaicResult,
  RedriveSources,
} from './mosaic-types';

/** What the breaker entity runs: its self-probe, and the check that its search attributes are registered. */
export interface BreakerActivities {
  probeEndpoint(spec: ProbeSpec): Promise<ProbeOutcome>;
  breakerSearchAttributesRegistered(): Promise<boolean>;
}

/** What the mosaic, block and re-drive workflows run. */
export interface MosaicActivities {
  /** Histories recorded before run tags call it with the request alone. */
  planMosaic(request: MosaicRequest, runTag?: string): Promise<MosaicPlan>;
  fetchMosaicBatch(input: MosaicBatchInput): Promise<MosaicBatchSummary>;
  assembleMosaic(input: AssembleInput): Promise<MosaicResult>;
  loadDeadLetters(
    manifestOrOutput: string,
    sources?: RedriveSources | null,
    opts?: { replaceMirrors?: boolean },
  ): Promise<DeadLetters>;
  /** Watches a refusing breaker for up to `forMs`; returns as soon as it lets traffic through again. */
  awaitBreaker(input: AwaitBreakerInput): Promise<AwaitBreakerResult>;
  /** Whether the namespace has the mosaic search attributes (MosaicName, ...) registered. */
  mosaicSearchAttributesRegistered(): Promise<boolean>;
}

/** What a seed runs after its levels: their served tiles packed into one MBTiles file. */
export interface SeedActivities {
  packMbtiles(input: PackMbtilesInput): Promise<PackMbtilesResult>;
}

/** What a schedule's run (scheduledMosaicWorkflow) runs while another run holds its output. */
export interface ScheduledMosaicActivities {
  /** Watches a workflow for up to `forMs`; returns as soon as it is no longer running. */
  awaitWorkflowClosed(input: AwaitWorkflowClosedInput): Promise<AwaitWorkflowClosedResult>;
}

export interface AwaitWorkflowClosedInput {
  workflowId: string;
  forMs: number;
}

export interface AwaitWorkflowClosedResult {
  /** The workflow is not running (closed, or there is none). */
  closed: boolean;
  /** Its last status as Temporal names it (RUNNING, COMPLETED, CANCELLED, ...), null when there is none. */
  status: string | null;
}

export interface AwaitBreakerInput {
  key: string;
  forMs: number;
}

export interface AwaitBreakerResult {
  /** The state that ended the wait (null: no entity, or the time ran out while it still refused). */
  state: BreakerStateName | null;
  /** The breaker let traffic through before `forMs` ran out. */
  woke: boolean;
  waitedMs: number;
}

/**
 * The task queue a mosaic's fetch batches go to, beside the worker's own: each worker serves it with its own
 * cap on batches at once (`tilebreaker worker --fetch-batches`), so one worker never holds more of a mosaic's
 * batches than it can run at its per-process `concurrency` while another worker idles.
 */
export const fetchTaskQueue = (taskQueue: string): string => `${taskQueue}-fetch`;
