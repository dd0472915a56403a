import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Worker } from '@temporalio/worker';
import { packageRoot } from '../../src/client/local-server';
import { workflowsPath } from '../helpers/temporal-env';

const dir = path.join(packageRoot(), 'test', 'histories');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

test('there is at least one committed history to replay', () => {
  assert.ok(files.length > 0, `no histories in ${dir}`);
});

test('every committed history replays against the current workflow code', async () => {
  const histories = files.map((f) => ({
    workflowId: f.replace(/\.json$/, ''),
    history: JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as unknown,
  }));
  const failures: string[] = [];
  let replayed = 0;
  for await (const result of Worker.runReplayHistories(
    { workflowsPath, replayName: 'committed-histories' },
    histories,
  )) {
    replayed++;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.name}: ${result.error.message}`);
  }
  assert.equal(replayed, files.length);
  assert.deepEqual(failures, []);
});
