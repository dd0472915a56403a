import { realpathSync } from 'node:fs';
import path from 'node:path';
import type { WorkerRoots } from '../confine/roots';
import { isObjectUrl, locationWithin } from '../storage/location';

/** The folder (or key part), under an output root, of the served records that follow a source across outputs. */
export const LEDGER_DIR = '.tilebreaker-served';

/**
 * Where a request shape's served record goes besides its tile store: `<root>/.tilebreaker-served`, the root
 * being the output folder or bucket prefix of the worker's roots that holds the store (the deepest one). Every
 * output and tile store under that root shares it, so a night that writes a dated output (a tile store of its
 * own) still finds that the source served the same request last night, and a layer gone from it is an outage,
 * not a configuration error. Null when the store lies under none of the roots as given (a root reached through a
 * symlink is taken as its real path).
 */
export function servedLedgerRoot(storeRoot: string, roots: WorkerRoots): string | null {
  const object = isObjectUrl(storeRoot);
  const candidates = object ? (roots.buckets ?? []) : roots.outputs.map(realOrSelf);
  const root = candidates.filter((r) => locationWithin(storeRoot, r)).sort((a, b) => b.length - a.length)[0];
  if (root === undefined) return null;
  return object ? `${root.replace(/\/+$/, '')}/${LEDGER_DIR}` : path.join(root, LEDGER_DIR);
}

function realOrSelf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}
