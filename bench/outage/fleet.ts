import { WorkerFetcher } from './fetcher';
import { now } from './clock';
import type { ModeRecorder } from './recorder';
import type { OutageServerProcess } from './server-client';
import type { ModeName, Scenario, Schedule } from './types';

/** One simulated worker of a mode: fetches one tile per step, back to back, until the scenario ends. */
export interface SimWorker {
  /** Fetches (or, when its breaker refuses, waits for) one tile. `deadline`: the scenario's end. */
  step(seq: number, deadline: number): Promise<void>;
  close?(): Promise<void>;
}

/** What a mode gets from the harness. */
export interface ModeContext {
  mode: ModeName;
  scenario: Scenario;
  /** http://127.0.0.1:<port> of this mode's fresh tile server. */
  baseUrl: string;
  recorder: ModeRecorder;
  log(message: string): void;
  /**
   * Creates one SimWorker per simulated worker (each with its own WorkerFetcher: own undici Agent), sends the
   * server its start signal, runs every worker's loop until the scenario's end and closes them.
   * Returns the schedule as the server set it.
   */
  runFleet(makeWorker: (fetcher: WorkerFetcher) => SimWorker | Promise<SimWorker>): Promise<Schedule>;
}

/**
 * How long a worker waits when its breaker refuses a call, in every breaker mode: the breaker's retry-after
 * (200 ms when it gives none), at least 10 ms (so a cooldown that is just ending cannot make a worker spin)
 * and at most 1 s.
 */
export function refusalWaitMs(retryAfterMs: number | null): number {
  return Math.min(Math.max(retryAfterMs ?? 200, 10), 1000);
}

/** The tile a worker asks for at step `seq`: all over zoom 12, so no two steps ask for the same URL. */
export function tileUrl(baseUrl: string, worker: number, seq: number): string {
  const n = worker * 1_000_003 + seq;
  return `${baseUrl}/12/${n % 4096}/${Math.floor(n / 4096) % 4096}.png`;
}

export function makeModeContext(
  mode: ModeName,
  scenario: Scenario,
  server: OutageServerProcess,
  recorder: ModeRecorder,
  log: (message: string) => void,
): ModeContext {
  return {
    mode,
    scenario,
    baseUrl: server.baseUrl,
    recorder,
    log,
    async runFleet(makeWorker) {
      const fetchers = Array.from({ length: scenario.workers }, (_, i) => new WorkerFetcher(mode, i, recorder));
      const workers = await Promise.all(fetchers.map((f) => Promise.resolve(makeWorker(f))));
      const schedule = await server.start({
        healthyMs: scenario.healthyMs,
        outageMs: scenario.outageMs,
        recoveryMs: scenario.recoveryMs,
        kind: scenario.outageKind,
        retryAfterSec: scenario.retryAfterSec,
      });
      const deadline = schedule.endAt;
      await Promise.all(
        workers.map(async (w, i) => {
          // Spread the first requests over a few ms, as processes of a real fleet would not start in lockstep.
          await new Promise((r) => setTimeout(r, (i * 7) % 50));
          for (let seq = 0; now() < deadline; seq++) {
            try {
              await w.step(seq, deadline);
            } catch (err) {
              recorder.error(`worker ${i}: ${err instanceof Error ? err.message : String(err)}`);
              await new Promise((r) => setTimeout(r, 50));
            }
          }
        }),
      );
      await Promise.all(workers.map(async (w) => w.close?.()));
      await Promise.all(fetchers.map((f) => f.close()));
      return schedule;
    },
  };
}
