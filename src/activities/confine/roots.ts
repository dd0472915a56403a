import path from 'node:path';

/**
 * Where a worker may read requesters' files and write their outputs. Anyone who can start a workflow on the
 * task queue chooses these paths, so the worker checks each one against roots its operator configured.
 */
export interface WorkerRoots {
  /** Folders sources files are read from (`sourcesFile`, `mosaic redrive --sources`). */
  sources: readonly string[];
  /** Folders outputs, tile stores, work folders and stitch strips are written under (and manifests read from). */
  outputs: readonly string[];
}

export const SOURCES_DIR_ENV = 'TILEBREAKER_SOURCES_DIR';
export const OUTPUT_DIR_ENV = 'TILEBREAKER_OUTPUT_DIR';

/** A list of folders as PATH writes them (`:` between them); empty entries are ignored. */
function parseRootList(value: string | undefined): string[] {
  return (value ?? '')
    .split(path.delimiter)
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/**
 * The roots from TILEBREAKER_SOURCES_DIR and TILEBREAKER_OUTPUT_DIR (each a `:`-separated list), each
 * defaulting to the worker's working directory; relative entries are taken from it too.
 */
export function rootsFromEnv(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): WorkerRoots {
  const list = (name: string) => {
    const given = parseRootList(env[name]);
    return (given.length ? given : [cwd]).map((p) => path.resolve(cwd, p));
  };
  return { sources: list(SOURCES_DIR_ENV), outputs: list(OUTPUT_DIR_ENV) };
}

/** Roots with explicit lists in place of the environment's (the worker command's --sources-dir / --output-dir). */
export function withRoots(base: WorkerRoots, override: { sources?: readonly string[]; outputs?: readonly string[] }, cwd: string = process.cwd()): WorkerRoots {
  const abs = (list: readonly string[]) => list.map((p) => path.resolve(cwd, p));
  return {
    sources: override.sources?.length ? abs(override.sources) : base.sources,
    outputs: override.outputs?.length ? abs(override.outputs) : base.outputs,
  };
}
