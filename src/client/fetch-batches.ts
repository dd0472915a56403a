/**
 * A worker's fetch-batch cap: its default, its environment variable and its check. Apart from the worker, so
 * the CLI can describe and check `--fetch-batches` without loading the SDK's worker.
 */

/**
 * Fetch batches a worker runs at once by default. Batches on one worker share its per-process `concurrency`,
 * so a second batch mostly keeps the connections busy while the first starts or finishes; a third only waits,
 * holding work an idle worker of the fleet could run (docs/benchmarks.md, bench:throughput --workers).
 */
export const DEFAULT_FETCH_BATCHES = 2;

/** The environment variable behind `tilebreaker worker --fetch-batches`. */
export const FETCH_BATCHES_ENV = 'TILEBREAKER_FETCH_BATCHES';

/** A fetch-batch cap as given (flag or environment), checked: a whole number from 1 to 1000. */
export function parseFetchBatches(raw: string, name: string): number {
  const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > 1000)
    throw new Error(`${name} must be a whole number from 1 to 1000 (got ${JSON.stringify(raw)})`);
  return n;
}
