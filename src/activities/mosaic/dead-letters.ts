import path from 'node:path';
import { ConfigError } from '../../breaker/config-error';
import type { DeadLetters, MosaicPlan, RedriveSources } from '../../messages/mosaic-types';
import { latestRecords, readJournals } from './journal';
import { outputBase, planFile, sourceForPlan } from './plan';
import { loadSource } from '../sources-file';
import { confineLocation } from '../confine/confine-location';
import { isObjectUrl } from '../storage/location';
import { storageFor } from '../storage/storage';
import { confinePlan } from '../confine/plan-paths';
import type { WorkerRoots } from '../confine/roots';
import type { SourceConfig } from '../../sources/schema';

/**
 * What a re-drive needs: the mosaic's plan (kept beside its journals from planning on) and its dead-lettered
 * tiles, taken from the journals (the manifest is derived from them). With `sources`, the source is read again
 * from the sources file as it is now, and failed tiles are fetched again as well; with `replaceMirrors`, the
 * tiles a mirror served too.
 */
export async function loadDeadLetters(
  manifestOrOutput: string,
  sources?: RedriveSources,
  roots?: WorkerRoots,
  replaceMirrors = false,
): Promise<DeadLetters> {
  const given = manifestOrOutput.replace(/\.manifest\.json$/i, '');
  // On a worker, a relative path is taken from the first output root, and the work folder is checked itself.
  const base = outputBase(
    roots
      ? await confineLocation(given, roots, 'manifest', 'redrive')
      : isObjectUrl(given)
        ? given
        : path.resolve(given),
  );
  const workDir = roots ? await confineLocation(`${base}.work`, roots, 'manifest', 'redrive') : `${base}.work`;
  const file = planFile(workDir);
  const noPlan = (why: string) =>
    new ConfigError('redrive', [
      `manifest: no mosaic plan at ${file} for ${JSON.stringify(manifestOrOutput)} (${why})`,
    ]);
  let body: Buffer | null;
  try {
    body = await storageFor(file).read(file);
  } catch (err) {
    // A bucket's error (throttling, a dropped connection) may pass on a retry; a local one will not.
    if (isObjectUrl(file)) throw err;
    throw noPlan((err as NodeJS.ErrnoException).code ?? 'error');
  }
  if (body === null) throw noPlan('ENOENT');
  let plan: MosaicPlan;
  try {
    plan = JSON.parse(body.toString('utf8')) as MosaicPlan;
  } catch {
    // Not V8's message: it quotes the file.
    throw noPlan('not valid JSON');
  }
  plan = await confinePlan(plan, roots, 'redrive');
  if (sources) plan = { ...plan, ...(await resolveSource(plan, sources, roots)) };
  // Mirrors judged against the old source say nothing of the source read again; and replacing the mirrors'
  // tiles asks the source alone: a tile it still refuses waits for it (or keeps its mirror's copy when the wait
  // ends), rather than going back to a mirror. Either way the mirrors stay listed, unused, with why.
  const unused = sources
    ? 'not used by a re-drive that reads the source again (judged against the source as planned)'
    : replaceMirrors
      ? "not used by a re-drive that replaces the mirrors' tiles"
      : null;
  if (unused && plan.mirrors)
    plan = { ...plan, mirrors: plan.mirrors.map((m) => ({ ...m, usable: false, reason: unused })) };
  const journals = await readJournals(plan.journalDir);
  const writtenAt = new Map(journals.flatMap((j) => j.tiles.map((t) => [t.i, j.writtenAt] as const)));
  const records = latestRecords(journals, plan.total);
  const indices: number[] = [];
  let notBefore = 0;
  // With the source read again, failures the source caused (a credential, a layer name, a URL) may be cured too.
  const redo = new Set(sources ? ['dead-lettered', 'failed'] : ['dead-lettered']);
  records.forEach((r, i) => {
    // With replaceMirrors, the tiles a mirror served go back to the source too.
    const mirrored = replaceMirrors && r?.status === 'ok' && r.tier?.startsWith('mirror:') === true;
    if (r !== null && !redo.has(r.status) && !mirrored) return;
    indices.push(i);
    if (r?.retryAfterMs !== undefined) notBefore = Math.max(notBefore, (writtenAt.get(i) ?? 0) + r.retryAfterMs);
  });
  const nextPass = journals.reduce((m, j) => Math.max(m, j.pass), -1) + 1;
  return { plan, indices, notBefore, nextPass };
}

/** The source from the sources file as it is now, fitted to the plan; it must draw the same tiles (tile size). */
async function resolveSource(
  plan: MosaicPlan,
  sources: RedriveSources,
  roots: WorkerRoots | undefined,
): Promise<Pick<MosaicPlan, 'source' | 'sourceName' | 'sourcesFile'>> {
  let name: string;
  let source: SourceConfig;
  let file: string;
  try {
    const given = roots ? sources.sourcesFile : path.resolve(sources.sourcesFile);
    ({ name, source, file } = await loadSource(given, sources.sourceName, {
      subject: 'redrive',
      field: 'sources.sourcesFile',
      ...(roots ? { roots: roots.sources } : {}),
    }));
  } catch (err) {
    throw err instanceof ConfigError
      ? err
      : new ConfigError('redrive', [`sources.sourcesFile: ${JSON.stringify(sources.sourcesFile)} cannot be read`]);
  }
  if (source.tileSize !== plan.source.tileSize) {
    throw new ConfigError('redrive', [
      `sources file ${sources.sourcesFile}: source ${JSON.stringify(name)} has tileSize ${source.tileSize}, the mosaic was planned with ${plan.source.tileSize}`,
    ]);
  }
  return {
    sourceName: name,
    sourcesFile: file,
    source: sourceForPlan(source, { zoom: plan.grid.z, directChunks: plan.directChunks }, 'redrive'),
  };
}
