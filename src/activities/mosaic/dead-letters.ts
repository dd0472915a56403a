import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../breaker/config-error';
import type { MosaicPlan } from '../../workflows/mosaic-types';
import { latestRecords, readJournals } from './journal';
import { outputBase, planFile } from './plan';

export interface DeadLetters {
  plan: MosaicPlan;
  /** The dead-lettered tiles, ascending. */
  indices: number[];
  /** Not before this instant (epoch ms): the latest breaker retryAfter among them, from when it was given. */
  notBefore: number;
  /** The pass a re-drive runs as (after every pass so far). */
  nextPass: number;
}

/**
 * What a re-drive needs: the mosaic's plan (kept beside its journals from planning on) and its dead-lettered
 * tiles, taken from the journals (the manifest is derived from them).
 */
export async function loadDeadLetters(manifestOrOutput: string): Promise<DeadLetters> {
  const base = outputBase(path.resolve(manifestOrOutput).replace(/\.manifest\.json$/i, ''));
  let plan: MosaicPlan;
  try {
    plan = JSON.parse(await readFile(planFile(`${base}.work`), 'utf8')) as MosaicPlan;
  } catch (err) {
    throw new ConfigError('redrive', [`manifest: no mosaic plan at ${planFile(`${base}.work`)} for ${JSON.stringify(manifestOrOutput)} (${(err as Error).message})`]);
  }
  const journals = await readJournals(plan.journalDir);
  const writtenAt = new Map(journals.flatMap((j) => j.tiles.map((t) => [t.i, j.writtenAt] as const)));
  const records = latestRecords(journals, plan.total);
  const indices: number[] = [];
  let notBefore = 0;
  records.forEach((r, i) => {
    if (r !== null && r.status !== 'dead-lettered') return;
    indices.push(i);
    if (r?.retryAfterMs !== undefined) notBefore = Math.max(notBefore, (writtenAt.get(i) ?? 0) + r.retryAfterMs);
  });
  const nextPass = journals.reduce((m, j) => Math.max(m, j.pass), -1) + 1;
  return { plan, indices, notBefore, nextPass };
}
