import {
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  workflowInfo,
  type Workflow,
} from '@temporalio/workflow';
import type { BreakerStateName } from '../breaker';
import type { MosaicPlan, StatusCounts } from '../messages/mosaic-types';
import type { TileRuns } from '../messages/tile-runs';

/**
 * A run continues as new once its history holds this many events (or the server suggests it). Checked
 * between passes and before each batch starts, so what can follow the check is bounded: the batches in
 * flight (at most 64, about 6 events each), one wait and a retry pass, the partial manifest if cancelled:
 * under 500 events. 2,000 keeps every run under a quarter of Temporal's 10,240-event warning (and far from
 * its 51,200 limit) while a healthy block of up to a few hundred batches still runs in one workflow.
 */
export const DEFAULT_EVENTS_PER_RUN = 2_000;

/**
 * Whether this run should hand over to a new one. Mosaic, block and re-drive runs continue as new before their
 * histories grow large: a `wait` against a server that stays down grows by about 11 events a pass.
 */
export interface RunBudget {
  full(): boolean;
}

export const NO_BUDGET: RunBudget = { full: () => false };

/** The budget of a run of this plan (the history's length at a workflow task is in the history: replay asks alike). */
export function runBudget(plan: Pick<MosaicPlan, 'eventsPerRun'>): RunBudget {
  const limit = plan.eventsPerRun ?? DEFAULT_EVENTS_PER_RUN;
  return {
    full: () => {
      const info = workflowInfo();
      return info.historyLength >= limit || info.continueAsNewSuggested;
    },
  };
}

/** What a block carries into its next run: the tiles still pending and where its passes stand. */
export interface PassCarry {
  /** Tiles still to fetch, as runs of consecutive indices. */
  pending: TileRuns;
  /** The pass they are fetched in. */
  pass: number;
  /** Passes in a row that got nothing through (the backoff grows with it). */
  futile: number;
  /** The run stopped mid-pass (not after a wait): the next pass starts every batch, not one first. */
  fullPass: boolean;
  /** What the block has counted so far. */
  counts: StatusCounts;
  requests: number;
  breakerStates: BreakerStateName[];
  configError?: string;
}

/** A job in blocks (child workflows): the blocks not yet run. */
export interface BlocksCarry {
  /** The tiles of the blocks not yet run. */
  remaining: TileRuns;
  /** The number of the first of them (child ids go on from it). */
  nextBlock: number;
  configError: string | null;
}

/** Where a mosaic's or re-drive's fetching stands: one block inline, or blocks in children. */
export type FetchCarry = { inline: PassCarry } | { blocks: BlocksCarry };

/** The `progress` query's figures, so it answers on the new run where the old one left off. */
export interface ProgressCarry {
  counts: StatusCounts;
  breakerStates: BreakerStateName[];
  fetchStartedAt: number | null;
}

/**
 * Continues as new with `args`, keeping the memo and search attributes as the run last set them, once every
 * signal or update handler has finished. The workflow id stays; clients that wait for the result or query
 * the id without a run id follow the chain to its newest run.
 */
export async function continueRun<F extends Workflow>(...args: Parameters<F>): Promise<never> {
  await condition(allHandlersFinished);
  const info = workflowInfo();
  return makeContinueAsNewFunc<F>({ memo: info.memo ?? {}, typedSearchAttributes: info.typedSearchAttributes })(
    ...args,
  );
}
