import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { historyFromJSON, historyToJSON, type History } from '@temporalio/common/lib/proto-utils';
import { Worker, type ReplayHistoriesIterable, type ReplayResult, type ReplayWorkerOptions } from '@temporalio/worker';
import { workflowsPath } from './worker';

/**
 * Recorded workflow histories: fetch a finished run's history from a server, save it as JSON, read it back,
 * and replay it against tilebreaker's workflow code, so a workflow change that runs already in flight could
 * not continue fails a test (`scripts/record-history.ts` and test/workflows/replay.test.ts do this for
 * test/histories/).
 */

export type { History };

/** A history and the workflow id to replay it under (a history's first event does not always record it). */
export interface RecordedHistory {
  workflowId: string;
  history: History;
}

/** Replay options: anything of the SDK's replay worker but the workflow code, which is tilebreaker's. */
export type ReplayOptions = Omit<ReplayWorkerOptions, 'workflowsPath' | 'workflowBundle'>;

/** The history of a finished run (`runId`: that run; default the latest). A running workflow is refused: its history is not whole yet. */
export async function fetchHistory(client: Client, workflowId: string, runId?: string): Promise<History> {
  const handle = client.workflow.getHandle(workflowId, runId);
  const { status } = await handle.describe();
  if (status.name === 'RUNNING') throw new Error(`workflow ${workflowId} is still running; record finished runs only`);
  return handle.fetchHistory();
}

/** Writes a history as JSON in the form Temporal's tools use (`historyToJSON`), creating the folder. */
export function saveHistory(history: History, file: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, historyToJSON(history) + '\n');
}

/** Fetches a finished run's history and saves it as JSON; returns the file and its number of events. */
export async function recordHistory(
  client: Client,
  workflowId: string,
  file: string,
  opts: { runId?: string } = {},
): Promise<{ file: string; events: number }> {
  const history = await fetchHistory(client, workflowId, opts.runId);
  saveHistory(history, file);
  return { file, events: history.events?.length ?? 0 };
}

/**
 * Reads a history saved as JSON. Its workflow id is the one its first event records, else the file's name
 * without `.json` (as the committed histories are named).
 */
export function loadHistoryFile(file: string): RecordedHistory {
  const json = JSON.parse(readFileSync(file, 'utf8')) as {
    events?: { workflowExecutionStartedEventAttributes?: { workflowId?: unknown } }[];
  };
  const recorded = json.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId;
  return {
    workflowId: typeof recorded === 'string' && recorded ? recorded : path.basename(file).replace(/\.json$/i, ''),
    history: historyFromJSON(json),
  };
}

/**
 * Replays histories against tilebreaker's workflow code, one after another, and returns one result per
 * history in order: `error` is set where a history did not replay (a DeterminismViolationError names what
 * the code did differently). Histories may be History objects or their parsed JSON.
 */
export async function replayHistories(
  histories: ReplayHistoriesIterable,
  options: ReplayOptions = {},
): Promise<ReplayResult[]> {
  const results: ReplayResult[] = [];
  for await (const result of Worker.runReplayHistories(
    { replayName: 'tilebreaker-replay', ...options, workflowsPath },
    histories,
  ))
    results.push(result);
  return results;
}

/** Replays one history file (see loadHistoryFile); throws what the replay found, e.g. a DeterminismViolationError. */
export async function replayHistoryFile(
  file: string,
  options: ReplayOptions & { workflowId?: string } = {},
): Promise<void> {
  const { workflowId, ...rest } = options;
  const recorded = loadHistoryFile(file);
  const [result] = await replayHistories(
    [{ workflowId: workflowId ?? recorded.workflowId, history: recorded.history }],
    rest,
  );
  if (!result) throw new Error(`replaying ${file}: the replayer returned no result`);
  if (result.error) throw result.error;
}
