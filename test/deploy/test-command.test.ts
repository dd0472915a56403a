import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

// `npm test` runs the compiled test files and nothing else: given the folder dist/test/, Node 20's runner
// also ran every helper module under it (test/helpers, test/scenarios, ...) as a test file with no tests.
const repo = path.join(__dirname, '..', '..', '..');

/** Every *.test.ts under test/, as the compiled file npm test should run. */
function testSources(folder: string): string[] {
  return readdirSync(path.join(repo, folder), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
    .map((e) =>
      path
        .relative(repo, path.join(e.parentPath, e.name))
        .replace(/^test\//, 'dist/test/')
        .replace(/\.ts$/, '.js'),
    )
    .sort();
}

test('npm test runs scripts/test.sh: every dist/test/**/*.test.js once, no helper module; .ci/run runs npm test', () => {
  const scripts = (
    JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  ).scripts;
  assert.match(scripts['test']!, /&& bash scripts\/test\.sh$/);
  assert.doesNotMatch(
    scripts['test']!,
    /node --test[^&]*dist\/test\/(\s|$)/,
    'not the folder: Node 20 loads its helpers as test files',
  );
  const listed = execFileSync('bash', [path.join(repo, 'scripts', 'test.sh')], {
    cwd: repo,
    env: { ...process.env, TILEBREAKER_LIST_TESTS: '1' },
    encoding: 'utf8',
  })
    .trim()
    .split('\n')
    .sort();
  // Compiled sources only: a stale .test.js of a deleted test would be listed too, and fail this.
  assert.deepEqual(listed, testSources('test'));
  assert.ok(listed.length > 100, `${listed.length} files`);
  assert.deepEqual(
    listed.filter((f) => /\/(helpers|scenarios|fixtures)\//.test(f)),
    [],
  );
  assert.match(readFileSync(path.join(repo, '.ci', 'run'), 'utf8'), /^npm test$/m);
});
