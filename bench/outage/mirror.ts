/**
 * `--scenario mirror`: 60 simulated workers fetch tiles through the pipeline's own fetch (makeFetchBatch: the
 * breaker guard, retries, validation, the tile store) from a primary that fails for the outage and has a
 * healthy mirror (a second tile server serving the same tiles), under the `hole` fallback. The primary's
 * breaker is a real entity on a real Temporal server, and so is the mirror's.
 *
 * Figures: tiles fetched, how many came from the primary and from the mirror, holes (tiles neither served),
 * and the requests the primary received during its outage (to set beside the shared mode's outage figure:
 * the mirror must not cost the failing primary more requests).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeFetchBatch, type FetchBatchInput, type TileResult } from '../../src/activities/fetch/fetch-batch';
import { BreakerGuard } from '../../src/activities/guard';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { parseSource } from '../../src/sources/schema';
import { startBenchTemporal } from './bench-temporal';
import { now, sleep } from './clock';
import { OutageServerProcess } from './server-client';
import { sharedPolicyConfig } from './shared-mode';
import type { Scenario, ServerStats } from './types';

export interface MirrorFigures {
  tiles: number;
  primary: number;
  mirror: number;
  holes: number;
  /** Tiles neither served nor a hole (failed, deferred): none expected. */
  other: number;
  primaryRequestsDuringOutage: number;
  mirrorRequests: number;
  /** The first other outcome's reason, when there is one. */
  otherReason?: string;
}

/** Where a server's outage requests fell: its onset (before the breaker opens) against the probes later on. */
export function outageSpread(stats: ServerStats): string {
  const at = (from: number, to: number) =>
    stats.requests.filter(
      ([t, , , phase]) => phase === 2 && t >= stats.schedule.outageAt + from && t < stats.schedule.outageAt + to,
    ).length;
  return `first 2 s ${at(0, 2_000)}, 2-5 s ${at(2_000, 5_000)}, after 5 s ${at(5_000, Infinity)}`;
}

export function mirrorLine(f: MirrorFigures): string {
  return `mirror: tiles=${f.tiles} primary=${f.primary} mirror=${f.mirror} holes=${f.holes} primary-requests-during-outage=${f.primaryRequestsDuringOutage}`;
}

/** Tile `seq` of worker `w`: all over zoom 12, no two steps of the fleet on the same tile. */
function tileOf(w: number, seq: number) {
  const n = w * 1_000_003 + seq;
  return { z: 12, x: n % 4096, y: Math.floor(n / 4096) % 4096 };
}

export async function runMirrorScenario(scenario: Scenario, log: (message: string) => void): Promise<MirrorFigures> {
  const primary = await OutageServerProcess.spawn(scenario.tileLatencyMs);
  const mirror = await OutageServerProcess.spawn(scenario.tileLatencyMs);
  const temporal = await startBenchTemporal('mirror', log);
  const store = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-mirror-'));
  const f: MirrorFigures = {
    tiles: 0,
    primary: 0,
    mirror: 0,
    holes: 0,
    other: 0,
    primaryRequestsDuringOutage: 0,
    mirrorRequests: 0,
  };
  const source = (base: string) => parseSource({ type: 'xyz', url: `${base}/{z}/{x}/{y}.png`, concurrency: 1 });
  const input = (tile: { z: number; x: number; y: number }): FetchBatchInput => ({
    sourceName: 'primary',
    source: source(primary.baseUrl),
    tiles: [tile],
    storeRoot: store,
    whenRefused: 'hole',
    retry: { attempts: scenario.retry.attempts, baseMs: scenario.retry.baseMs, capMs: scenario.retry.capMs },
    mirrors: [{ name: 'mirror', source: source(mirror.baseUrl) }],
  });
  const count = (r: TileResult) => {
    f.tiles++;
    if (r.status === 'ok') {
      if (r.tier === 'mirror:mirror') f.mirror++;
      else f.primary++;
    } else if (r.status === 'hole') f.holes++;
    else {
      f.other++;
      f.otherReason ??= `${r.status}: ${r.reason}`;
    }
  };
  const workers = Array.from({ length: scenario.workers }, (_, w) => {
    const guard = new BreakerGuard({
      client: temporal.client,
      taskQueue: temporal.taskQueue,
      reporter: `sim-${w}`,
      config: sharedPolicyConfig(scenario),
      logger: { warn: () => undefined },
    });
    const pools = new EndpointPools();
    return { guard, pools, fetch: makeFetchBatch({ pools, guard }) };
  });
  try {
    log(
      `mirror: primary ${primary.baseUrl}, mirror ${mirror.baseUrl}, Temporal ${temporal.address}; ${scenario.workers} workers`,
    );
    const total = scenario.healthyMs + scenario.outageMs + scenario.recoveryMs;
    await mirror.start({ healthyMs: total + 60_000, outageMs: 0, recoveryMs: 0, kind: '503', retryAfterSec: null });
    const schedule = await primary.start({
      healthyMs: scenario.healthyMs,
      outageMs: scenario.outageMs,
      recoveryMs: scenario.recoveryMs,
      kind: scenario.outageKind,
      retryAfterSec: scenario.retryAfterSec,
    });
    await Promise.all(
      workers.map(async (worker, w) => {
        await sleep((w * 7) % 50);
        for (let seq = 0; now() < schedule.endAt; seq++) {
          try {
            for (const r of await worker.fetch(input(tileOf(w, seq)))) count(r);
          } catch (err) {
            f.other++;
            f.otherReason ??= `threw: ${err instanceof Error ? err.message : String(err)}`;
            await sleep(50);
          }
        }
      }),
    );
    const p = await primary.stats();
    const m = await mirror.stats();
    f.primaryRequestsDuringOutage = p.byPhase.outage;
    log(`mirror: the primary's outage requests ${outageSpread(p)}`);
    f.mirrorRequests = m.requests.length;
    return f;
  } finally {
    await Promise.all(workers.map(async ({ guard, pools }) => (await guard.close(), await pools.close())));
    await temporal.close((m) => log(`mirror: worker: ${m}`));
    await primary.close();
    await mirror.close();
    rmSync(store, { recursive: true, force: true });
  }
}
