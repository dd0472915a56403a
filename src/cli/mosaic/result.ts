// How a mosaic ended: its summary, its result, and the exit code it gives.
import { printError } from '../errors';
import { exitCodeFor, type MosaicStatus } from '../../client/mosaics';
import type { MosaicResult } from '../../messages/mosaic-types';

/** A result's counts by status, on one line. */
export function summaryLine(result: MosaicResult): string {
  const c = result.counts;
  return `${result.total} tiles: ok ${c.ok}, stale ${c.stale}, hole ${c.hole}, dead-lettered ${c['dead-lettered']}, failed ${c.failed}${c.outside ? `, outside the coverage ${c.outside}` : ''}${result.partial ? ' (partial)' : ''}`;
}

/** A result as JSON, or as its summary line with its notes and files. */
export function printResult(result: MosaicResult, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(summaryLine(result));
  if (result.configError !== undefined) console.log(`  ${result.configError}`);
  if (result.earlierCopies)
    console.log(
      `  ${result.earlierCopies} of the gaps drawn from their last good copy in the tile store (mask: stale; a re-drive fetches them)`,
    );
  for (const f of result.files) console.log(`  ${f}`);
}

/**
 * Prints how a mosaic ended (or that it still runs) and returns the exit code: its result's, 2 when it was
 * refused at planning, 1 when it failed or was cancelled, 0 while it runs.
 */
export function finish(s: MosaicStatus, json: boolean): number {
  if (s.result) {
    printResult(s.result, json);
    return exitCodeFor(s.result);
  }
  // Refused at planning (the request, or the sources file as the worker read it): it could not run, exit 2,
  // which under --json is an error object as every other exit 2 is.
  const refused = s.status !== 'RUNNING' && s.failureType === 'ConfigError';
  if (json && refused)
    printError(
      {
        message: `mosaic ${s.workflowId}: ${s.failure ?? s.status}`,
        kind: 'invalid',
        exitCode: 2,
        workflowId: s.workflowId,
      },
      true,
    );
  else if (json) console.log(JSON.stringify(s, null, 2));
  else console.log(`mosaic ${s.workflowId}: ${s.status}${s.failure ? `: ${s.failure}` : ''}`);
  if (s.status === 'RUNNING') return 0;
  return refused ? 2 : 1;
}
