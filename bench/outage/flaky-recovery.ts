/**
 * `bench:outage -- --scenario flaky-recovery`: how long a breaker takes to close on a server that comes back
 * answering only about 2 of 3 requests (each answer a 503 with probability 1/3). A few simulated workers (each
 * its own BreakerGuard, the real one) fetch back to back through a short healthy spell, a 503 outage that trips
 * the real breaker entity on a Temporal dev server, and the flaky recovery; the figure is the time from the
 * server's recovery until the entity closes (its transition log), per trial.
 *
 *   consecutive   the project's default half-open rule: probesToClose (3) successful probes in a row, any
 *                 failed probe reopens;
 *   k-of-n        probesToClose 2 with probeTrials 3: 2 successes among at most 3 probes;
 *   consecutive-2 probesToClose 2 in a row (logged, not in the last line): k-of-n's k without its n, so the
 *                 log tells what the smaller k does from what the trials do.
 *
 * Both run the project's defaults otherwise (a new entity's probe cadence and back-off), with a 1 s cooldown.
 * Trial i of each mode meets the same sequence of answers (the server's draws come from a generator seeded
 * with i), so the two are compared on equal luck. Last line:
 *
 *   recovery: consecutive-s=<float> k-of-n-s=<float>
 *
 * (the mean over the trials; each trial is cut off at `maxRecoveryMs`, counted at that bound and logged).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BreakerGuard } from '../../src/activities/guard';
import type { PolicyConfigInput } from '../../src/breaker';
import { breakerKey, breakerWorkflowId } from '../../src/breaker/key';
import { transitionsQuery } from '../../src/messages/breaker';
import { prng } from '../../test/helpers/prng';
import { startBenchTemporal, type BenchTemporal } from './bench-temporal';
import { now, sleep } from './clock';
import { refusalWaitMs } from './fleet';
import { makeTilePng } from './tile';

export interface FlakyRecoveryOptions {
  trials: number;
  workers: number;
  healthyMs: number;
  outageMs: number;
  /** The longest a trial waits for the close after the recovery. */
  maxRecoveryMs: number;
  /** Share of requests answered 503 after the recovery. */
  failShare: number;
  log(message: string): void;
}

export const FLAKY_RECOVERY_DEFAULTS: Omit<FlakyRecoveryOptions, 'log'> = {
  trials: 8,
  workers: 4,
  healthyMs: 2_000,
  outageMs: 3_000,
  maxRecoveryMs: 120_000,
  failShare: 1 / 3,
};

const MODES = {
  consecutive: {},
  'k-of-n': { probesToClose: 2, probeTrials: 3 },
  'consecutive-2': { probesToClose: 2 },
} satisfies Record<string, PolicyConfigInput>;
type FlakyMode = keyof typeof MODES;

export interface FlakyRecoveryFigures {
  /** Seconds from the recovery to the close, per trial, by mode. */
  seconds: Record<FlakyMode, number[]>;
  /** Trials cut off at maxRecoveryMs, by mode. */
  cutOff: Record<FlakyMode, number>;
}

export function flakyRecoveryLine(f: FlakyRecoveryFigures): string {
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  return `recovery: consecutive-s=${mean(f.seconds.consecutive).toFixed(2)} k-of-n-s=${mean(f.seconds['k-of-n']).toFixed(2)}`;
}

/** A tile server: healthy, then every request a 503, then each request a 503 with probability failShare. */
class FlakyServer {
  phase: 'healthy' | 'down' | 'flaky' = 'healthy';
  readonly answers = { ok: 0, failed: 0 };
  private readonly server: http.Server;
  private readonly draw: () => number;

  constructor(
    private readonly tile: Buffer,
    private readonly failShare: number,
    seed: number,
  ) {
    this.draw = prng(seed);
    this.server = http.createServer((req, res) => {
      req.resume();
      const fail = this.phase === 'down' || (this.phase === 'flaky' && this.draw() < this.failShare);
      if (fail) {
        if (this.phase === 'flaky') this.answers.failed++;
        res.writeHead(503, { 'content-type': 'text/plain' }).end('unavailable');
        return;
      }
      if (this.phase === 'flaky') this.answers.ok++;
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': this.tile.length }).end(this.tile);
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export async function runFlakyRecoveryScenario(o: FlakyRecoveryOptions): Promise<FlakyRecoveryFigures> {
  const temporal = await startBenchTemporal('flaky-recovery', (m) => o.log(m));
  const { client, taskQueue } = temporal;
  const tile = await makeTilePng();
  const figures: FlakyRecoveryFigures = {
    seconds: { consecutive: [], 'k-of-n': [], 'consecutive-2': [] },
    cutOff: { consecutive: 0, 'k-of-n': 0, 'consecutive-2': 0 },
  };
  try {
    for (let trial = 0; trial < o.trials; trial++) {
      for (const mode of Object.keys(MODES) as FlakyMode[]) {
        const s = await runTrial(o, mode, trial, tile, client, taskQueue);
        figures.seconds[mode].push(s.seconds);
        if (s.cutOff) figures.cutOff[mode]++;
        o.log(
          `flaky-recovery: trial ${trial + 1}/${o.trials} ${mode}: ${s.cutOff ? 'NOT closed within' : 'closed after'} ${s.seconds.toFixed(2)} s; ${s.detail}`,
        );
      }
    }
  } finally {
    await temporal.close((m) => o.log(`flaky-recovery: worker: ${m}`));
  }
  return figures;
}

async function runTrial(
  o: FlakyRecoveryOptions,
  mode: FlakyMode,
  trial: number,
  tile: Buffer,
  client: BenchTemporal['client'],
  taskQueue: string,
): Promise<{ seconds: number; cutOff: boolean; detail: string }> {
  const server = new FlakyServer(tile, o.failShare, 1_000 + trial);
  const baseUrl = await server.listen();
  const key = breakerKey(baseUrl);
  const config: PolicyConfigInput = { minSamples: 10, cooldownMs: 1_000, ...MODES[mode] };
  const guards = Array.from(
    { length: o.workers },
    (_, w) => new BreakerGuard({ client, taskQueue, reporter: `flaky-${mode}-${trial}-${w}`, config }),
  );
  let stop = false;
  const loops = guards.map(async (guard, w) => {
    for (let seq = 0; !stop; seq++) {
      const d = await guard.acquire(key);
      if (d.kind === 'refused') {
        await sleep(refusalWaitMs(d.retryAfterMs));
        continue;
      }
      const started = now();
      const kind = await fetch(`${baseUrl}/12/${w}/${seq}.png`, { signal: AbortSignal.timeout(5_000) }).then(
        async (r) => (await r.arrayBuffer(), r.ok ? ('success' as const) : ('transient' as const)),
        () => 'transient' as const,
      );
      guard.release(d, { kind, latencyMs: now() - started });
    }
  });
  let seconds = o.maxRecoveryMs / 1000;
  let cutOff = true;
  let detail = '';
  try {
    await sleep(o.healthyMs);
    server.phase = 'down';
    await sleep(o.outageMs);
    const handle = client.workflow.getHandle(breakerWorkflowId(key));
    const tripped = (await handle.query(transitionsQuery)).some((t) => t.to === 'open');
    if (!tripped) detail = 'the outage did not trip the breaker; ';
    server.phase = 'flaky';
    const recoverAt = now();
    while (now() - recoverAt < o.maxRecoveryMs) {
      await sleep(250);
      const closed = (await handle.query(transitionsQuery))
        .filter((t) => t.to === 'closed' && t.reason === 'probes-succeeded' && t.at >= recoverAt)
        .sort((a, b) => a.at - b.at)[0];
      if (closed) {
        seconds = (closed.at - recoverAt) / 1000;
        cutOff = false;
        break;
      }
    }
    const log = await handle.query(transitionsQuery);
    const failedProbes = log.filter((t) => t.reason === 'probe-failed' && t.at >= recoverAt).length;
    detail += `${failedProbes} reopenings after the recovery; by the time the close was seen the server had answered ${server.answers.ok} ok and ${server.answers.failed} 503 since`;
  } finally {
    stop = true;
    await Promise.all(loops);
    await Promise.all(guards.map((g) => g.close()));
    await server.close();
  }
  return { seconds, cutOff, detail };
}
