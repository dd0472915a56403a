import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { WORKFLOW_CACHE_ENV, workflowCode, workflowsPath } from '../../src/client/worker';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-workflow-cache-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('without a workflow cache a worker bundles its workflows module, as the SDK does', async () => {
  assert.deepEqual(await workflowCode({}), { workflowsPath });
});

test('a worker of a build already bundled takes the kept bundle instead of bundling again', async () => {
  const env = { [WORKFLOW_CACHE_ENV]: dir };
  const first = await workflowCode(env, () => 'build-a');
  assert.ok('workflowBundle' in first, 'a bundle');
  const file = path.join(dir, 'workflows-build-a.js');
  assert.equal(readFileSync(file, 'utf8'), first.workflowBundle.code, 'kept under the build');
  assert.match(first.workflowBundle.code, /breakerEntityWorkflow/);
  // What the next worker gets is the kept file: marked here, it comes back marked.
  writeFileSync(file, `${first.workflowBundle.code}\n// kept`);
  const second = await workflowCode(env, () => 'build-a');
  assert.ok(
    'workflowBundle' in second && second.workflowBundle.code.endsWith('// kept'),
    'read from the cache, not bundled again',
  );
  assert.equal(existsSync(path.join(dir, 'workflows-build-b.js')), false);
});
