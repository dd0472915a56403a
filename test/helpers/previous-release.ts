import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/client/local-server';

/** A release before object storage: the capability checks are tested against it. */
export const PREVIOUS_RELEASE = '930c4fb';
/** Release 0.1.0, the last whose runs were auto-upgrade: the upgrade to 1.x starts from it. */
export const RELEASE_0_1_0 = '51da02a';

export interface ReleaseBuild {
  commit: string;
  dir: string;
  /** Its `tilebreaker` CLI (dist/src/cli/main.js). */
  cli: string;
  /** How long its build took (0: taken from the cache). */
  buildMs: number;
}

/**
 * The previous release, built from git into `.build-releases/<commit>/` (git-ignored) and kept there: the
 * commit's files (`git archive`), this checkout's node_modules, `tsc` over its src/ only (its tests and benches
 * are not needed to run a worker). A commit missing from the clone (a shallow CI checkout) is an error that
 * says so, never a skip.
 */
export function buildRelease(ref: string = PREVIOUS_RELEASE, root: string = packageRoot()): ReleaseBuild {
  const found = spawnSync('git', ['-C', root, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`], {
    encoding: 'utf8',
  });
  if (found.status !== 0) {
    throw new Error(
      `the previous release ${ref} is not in this clone's history (${root}); the upgrade test builds it from git: fetch main's full history (git fetch --unshallow origin main)`,
    );
  }
  const commit = found.stdout.trim();
  const dir = path.join(root, '.build-releases', commit);
  const cli = path.join(dir, 'dist', 'src', 'cli', 'main.js');
  const marker = path.join(dir, '.built');
  if (existsSync(marker) && existsSync(cli)) return { commit, dir, cli, buildMs: 0 };
  // Built aside and renamed into place: two test files may build the same release at once (tests run files
  // in parallel), and one must never remove or overwrite the files the other is compiling or running.
  const started = Date.now();
  const aside = `${dir}.building-${process.pid}`;
  rmSync(aside, { recursive: true, force: true });
  mkdirSync(aside, { recursive: true });
  const archive = execFileSync('git', ['-C', root, 'archive', '--format=tar', commit], {
    maxBuffer: 512 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', aside], { input: archive });
  symlinkSync(realpathSync(path.join(root, 'node_modules')), path.join(aside, 'node_modules'), 'dir');
  writeFileSync(
    path.join(aside, 'tsconfig.release.json'),
    JSON.stringify({
      extends: './tsconfig.json',
      include: ['src/**/*.ts'],
      compilerOptions: { declaration: false, sourceMap: false },
    }),
  );
  const tsc = spawnSync(
    process.execPath,
    [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.release.json'],
    { cwd: aside, encoding: 'utf8' },
  );
  if (tsc.status !== 0 || !existsSync(path.join(aside, 'dist', 'src', 'cli', 'main.js'))) {
    rmSync(aside, { recursive: true, force: true });
    throw new Error(
      `building ${commit} in ${aside} failed (tsc exit ${tsc.status}): ${(tsc.stdout + tsc.stderr).slice(-2_000)}`,
    );
  }
  const buildMs = Date.now() - started;
  writeFileSync(path.join(aside, '.built'), JSON.stringify({ commit, buildMs, at: new Date().toISOString() }));
  // A half-built folder from an interrupted run of the old way is removed; a finished one (another file's build
  // that won the race) is kept, and this build is dropped.
  if (existsSync(dir) && !existsSync(marker)) rmSync(dir, { recursive: true, force: true });
  try {
    renameSync(aside, dir);
  } catch (err) {
    rmSync(aside, { recursive: true, force: true });
    if (!existsSync(marker)) throw err;
    return { commit, dir, cli, buildMs: 0 };
  }
  return { commit, dir, cli, buildMs };
}

/** The package version the build says it is. */
export const releaseVersion = (b: ReleaseBuild): string =>
  (JSON.parse(readFileSync(path.join(b.dir, 'package.json'), 'utf8')) as { version: string }).version;
