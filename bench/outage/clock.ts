/**
 * One clock for the whole benchmark: epoch milliseconds with sub-millisecond resolution
 * (performance.timeOrigin + performance.now()). The tile server (a child process) and the simulated workers
 * read the same kind of clock, so request timestamps from both sides line up to well under a millisecond
 * on one machine, and ties between "request ended" and "request started" are rare.
 */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
