/**
 * The contracts of a plan's mirrors, judged when the plan is made: each mirror's grid and format against the
 * primary's, then its agreement measured on sample tiles of the plan's own grid, fetched from both. A
 * measurement that agrees is recorded in the tile store, so that a run planned while the primary is down (the
 * night the mirror is needed most) may rely on the last agreement measured for the same two configurations.
 */
import { createHash } from 'node:crypto';
import type { MirrorAgreement, MirrorPlan, MosaicPlan } from '../../messages/mosaic-types';
import type { SourceConfig } from '../../sources/schema';
import type { TileAddress } from '../../sources/request-url';
import { sourceBreakerKey } from '../fetch/fetch-batch';
import { joinLocation } from '../storage/location';
import { storageFor } from '../storage/storage';
import { EndpointPools } from '../http/endpoint-pool';
import { gridMismatch, measureAgreement, type AgreementOptions } from './contract';

/** A recorded agreement is relied on for at most this long. */
export const AGREEMENT_KEPT_MS = 30 * 86_400_000;
/** Sample tiles per mirror (each fetched from both sides). */
export const SAMPLE_TILES = 4;

export interface MirrorCandidate {
  name: string;
  /** The mirror as the plan would use it (as the sources file has it when refused). */
  source: SourceConfig;
  /** Why the plan cannot use it at all (its zoom range, a direct-chunk plan of a mirror that is not WMS). */
  refused?: string;
}

/** Up to `n` tiles spread over the grid: the centres of its quarters (or fewer, distinct, for a small grid). */
export function sampleTiles(grid: MosaicPlan['grid'], n = SAMPLE_TILES): TileAddress[] {
  const cols = grid.xMax - grid.xMin + 1;
  const rows = grid.yMax - grid.yMin + 1;
  const out = new Map<string, TileAddress>();
  for (const [fx, fy] of [
    [0.25, 0.25],
    [0.75, 0.75],
    [0.75, 0.25],
    [0.25, 0.75],
  ] as const) {
    const t = {
      z: grid.z,
      x: grid.xMin + Math.min(cols - 1, Math.floor(cols * fx)),
      y: grid.yMin + Math.min(rows - 1, Math.floor(rows * fy)),
    };
    out.set(`${t.x}/${t.y}`, t);
    if (out.size >= n) break;
  }
  return [...out.values()];
}

/** Each mirror's contract, in order: usable, or the reason it is not. Never throws for a mirror's fault. */
export async function judgeMirrors(
  plan: Pick<MosaicPlan, 'sourceName' | 'source' | 'grid' | 'storeRoot'>,
  candidates: readonly MirrorCandidate[],
  opts: AgreementOptions & { now?: number } = {},
): Promise<MirrorPlan[]> {
  const now = opts.now ?? Date.now();
  // One set of connections, and each of the primary's samples fetched once, whatever the number of mirrors.
  const pools = opts.pools ?? new EndpointPools();
  const shared = { ...opts, pools, primarySamples: new Map() };
  try {
    // Judged side by side: a primary that hangs costs the planner one measurement's time, not one per mirror.
    return await Promise.all(candidates.map((c) => judgeOne(plan, c, shared, now)));
  } finally {
    if (!opts.pools) await pools.close();
  }
}

async function judgeOne(
  plan: Pick<MosaicPlan, 'sourceName' | 'source' | 'grid' | 'storeRoot'>,
  c: MirrorCandidate,
  opts: AgreementOptions,
  now: number,
): Promise<MirrorPlan> {
  if (c.refused !== undefined) return { name: c.name, source: c.source, usable: false, reason: c.refused };
  const source = c.source;
  const grid = gridMismatch(plan.source, source, c.name);
  if (grid) return { name: c.name, source, usable: false, reason: grid };
  // A mirror behind the primary's own breaker is refused whenever the primary is, and its failures would
  // count against the primary: it must be another failure domain.
  if (sourceBreakerKey(source) === sourceBreakerKey(plan.source)) {
    return {
      name: c.name,
      source,
      usable: false,
      reason: `mirror ${JSON.stringify(c.name)}: shares the primary's breaker ${sourceBreakerKey(source)} (the same scheme, host and port); give one of them a breakerPartition, or use another host`,
    };
  }
  const measured = await measureAgreement(
    { name: plan.sourceName, source: plan.source },
    { name: c.name, source },
    sampleTiles(plan.grid),
    opts,
  );
  const agreement: MirrorAgreement = {
    tiles: measured.tiles,
    meanAbsDiff: round(measured.meanAbsDiff),
    maxMeanAbsDiff: round(measured.maxMeanAbsDiff),
    differingShare: round(measured.differingShare),
    maxDifferingShare: round(measured.maxDifferingShare),
    measuredAt: new Date(now).toISOString(),
  };
  const record = recordOf(plan.storeRoot, plan.sourceName, c.name);
  const fingerprint = fingerprintOf(plan.source, source);
  if (measured.agrees) {
    await writeRecord(record, { fingerprint, agreement });
    return {
      name: c.name,
      source,
      usable: true,
      reason: `agrees with the primary on ${agreement.tiles} sample tiles`,
      agreement,
    };
  }
  const inconclusive = measured.reason?.startsWith('inconclusive') ?? true;
  const kept = inconclusive ? await readRecord(record, fingerprint, now) : null;
  if (kept)
    return {
      name: c.name,
      source,
      usable: true,
      reason: `not measured now (${measured.reason ?? 'no reason'}); agreed when measured at ${kept.measuredAt}`,
      agreement: kept,
    };
  return {
    name: c.name,
    source,
    usable: false,
    reason: measured.reason ?? 'the agreement could not be measured',
    ...(measured.tiles ? { agreement } : {}),
  };
}

const round = (v: number) => Math.round(v * 10_000) / 10_000;

/** Where a primary's agreement with one mirror is kept: beside the sources' tiles (source names never start with `_`). */
function recordOf(storeRoot: string, primary: string, mirror: string): string {
  return joinLocation(storeRoot, '_mirrors', `${primary}--${mirror}.json`);
}

/** The two configurations an agreement was measured on: a change to either (a layer, a style, a URL) voids it. */
function fingerprintOf(primary: SourceConfig, mirror: SourceConfig): string {
  return createHash('sha256')
    .update(JSON.stringify([primary, mirror]))
    .digest('hex');
}

async function writeRecord(file: string, body: { fingerprint: string; agreement: MirrorAgreement }): Promise<void> {
  try {
    await storageFor(file).write(file, Buffer.from(JSON.stringify(body)), { contentType: 'application/json' });
  } catch {
    // Only the record is lost: the next planning measures again.
  }
}

async function readRecord(file: string, fingerprint: string, now: number): Promise<MirrorAgreement | null> {
  try {
    const body = await storageFor(file).read(file);
    if (!body) return null;
    const r = JSON.parse(body.toString('utf8')) as { fingerprint?: unknown; agreement?: MirrorAgreement };
    if (r.fingerprint !== fingerprint || !r.agreement || typeof r.agreement.measuredAt !== 'string') return null;
    const at = Date.parse(r.agreement.measuredAt);
    return Number.isFinite(at) && now - at <= AGREEMENT_KEPT_MS && at <= now ? r.agreement : null;
  } catch {
    return null;
  }
}
