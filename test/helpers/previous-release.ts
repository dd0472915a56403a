import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/client/local-server';

/** The release before this one: the commit a rolling upgrade starts from (and a rollback returns to). */
export const PREVIOUS_RELEASE = '930c4fb';

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
  const found = spawnSync('git', ['-C', root, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { encoding: 'utf8' });
  if (found.status !== 0) {
    throw new Error(`the previous release ${ref} is not in this clone's history (${root}); the upgrade test builds it from git: fetch main's full history (git fetch --unshallow origin main)`);
  }
  const commit = found.stdout.trim();
  const dir = path.join(root, '.build-releases', commit);
  const cli = path.join(dir, 'dist', 'src', 'cli', 'main.js');
  const marker = path.join(dir, '.built');
  if (existsSync(marker) && existsSync(cli)) return { commit, dir, cli, buildMs: 0 };
  const started = Date.now();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = execFileSync('git', ['-C', root, 'archive', '--format=tar', commit], { maxBuffer: 512 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  symlinkSync(realpathSync(path.join(root, 'node_modules')), path.join(dir, 'node_modules'), 'dir');
  writeFileSync(path.join(dir, 'tsconfig.release.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src/**/*.ts'], compilerOptions: { declaration: false, sourceMap: false } }));
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.release.json'], { cwd: dir, encoding: 'utf8' });
  if (tsc.status !== 0 || !existsSync(cli)) throw new Error(`building ${commit} in ${dir} failed (tsc exit ${tsc.status}): ${(tsc.stdout + tsc.stderr).slice(-2_000)}`);
  const buildMs = Date.now() - started;
  writeFileSync(marker, JSON.stringify({ commit, buildMs, at: new Date().toISOString() }));
  return { commit, dir, cli, buildMs };
}

/** The package version the build says it is. */
export const releaseVersion = (b: ReleaseBuild): string => (JSON.parse(readFileSync(path.join(b.dir, 'package.json'), 'utf8')) as { version: string }).version;
