import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { MosaicRequest } from '../../messages/mosaic-types';
import { parseBbox, readCoverageFile } from '../area-options';

/** `mosaic start`'s options, as commander parses them: the request's fields, and how to follow the run. */
export interface StartOptions {
  request?: string;
  sources?: string;
  sourcesOnWorker?: boolean;
  source?: string;
  bbox?: string;
  coverage?: string;
  crs?: string;
  zoom?: string;
  out?: string;
  format?: string;
  /** false with --no-sidecars (commander gives true otherwise). */
  sidecars?: boolean;
  fallback?: MosaicRequest['fallback'];
  afterDeadline?: MosaicRequest['afterDeadline'];
  deadline?: string;
  maxTiles?: string;
  store?: string;
  refreshBefore?: string;
  batchSize?: string;
  blockTiles?: string;
  parallelBatches?: string;
  breaker?: boolean;
  id?: string;
  name?: string;
  wait?: boolean;
  watch?: boolean;
  json?: boolean;
}

function readRequestFile(file: string): Partial<MosaicRequest> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`request file ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return (/\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text)) as Partial<MosaicRequest>;
  } catch (err) {
    // The user's own file: the parser's message (and its line) goes with the file's name.
    throw new Error(
      `request file ${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** A numeric flag's value, or undefined when it is not given. */
export const numberOption = (flag: string, v: string | undefined) => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${flag}: must be a number (got ${JSON.stringify(v)})`);
  return n;
};

/** A request from a file and/or flags (flags win); validation proper is the planner's. */
export function requestFromOptions(o: StartOptions): MosaicRequest {
  const base: Partial<MosaicRequest> = o.request ? readRequestFile(o.request) : {};
  const bbox = o.bbox === undefined ? undefined : parseBbox(o.bbox);
  const r: Record<string, unknown> = {
    ...base,
    ...(o.sources !== undefined ? { sourcesFile: o.sources } : {}),
    ...(o.source !== undefined ? { sourceName: o.source } : {}),
    ...(bbox ? { bbox } : {}),
    ...(o.coverage !== undefined ? { coverage: readCoverageFile(o.coverage) } : {}),
    ...(o.crs !== undefined ? { crs: o.crs } : {}),
    ...(o.zoom !== undefined ? { zoom: numberOption('--zoom', o.zoom) } : {}),
    ...(o.out !== undefined ? { output: o.out } : {}),
    ...(o.format !== undefined
      ? {
          extraFormats: o.format
            .split(',')
            .map((f) => f.trim())
            .filter(Boolean),
        }
      : {}),
    ...(o.sidecars === false ? { sidecars: false } : {}),
    ...(o.fallback !== undefined ? { fallback: o.fallback } : {}),
    ...(o.afterDeadline !== undefined ? { afterDeadline: o.afterDeadline } : {}),
    ...(o.deadline !== undefined ? { deadline: o.deadline } : {}),
    ...(o.maxTiles !== undefined ? { maxTiles: numberOption('--max-tiles', o.maxTiles) } : {}),
    ...(o.store !== undefined ? { storeRoot: o.store } : {}),
    ...(o.refreshBefore !== undefined ? { refreshBefore: o.refreshBefore } : {}),
    ...(o.batchSize !== undefined ? { batchSize: numberOption('--batch-size', o.batchSize) } : {}),
    ...(o.blockTiles !== undefined ? { blockTiles: numberOption('--block-tiles', o.blockTiles) } : {}),
    ...(o.parallelBatches !== undefined
      ? { parallelBatches: numberOption('--parallel-batches', o.parallelBatches) }
      : {}),
    ...(o.breaker === false ? { breaker: false } : {}),
  };
  if (r['output'] === undefined) throw new Error('mosaic start: give --out PATH.tif (or output in --request)');
  return r as unknown as MosaicRequest;
}

/** Where a request's sourcesFile came from, for messages: the flag wins over the request file. */
export function sourcesFrom(o: Pick<StartOptions, 'sources' | 'request'>): string {
  return o.sources === undefined && o.request !== undefined ? `sourcesFile in --request ${o.request}` : '--sources';
}
