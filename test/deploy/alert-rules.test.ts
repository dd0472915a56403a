import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';

const deploy = path.join(__dirname, '..', '..', '..', 'deploy', 'prometheus');
const promtool = spawnSync('promtool', ['--version']).status === 0;
// .ci/run installs Debian's prometheus package (promtool): in CI a missing promtool is a failure, not a skip.
const skip = promtool || process.env['CI'] ? false : "promtool is not installed (Debian's prometheus package)";

test('the alert rules are valid and their unit tests pass (promtool test rules)', { skip }, () => {
  const check = spawnSync('promtool', ['check', 'rules', path.join(deploy, 'alerts.yml')], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stdout + check.stderr);
  const run = spawnSync('promtool', ['test', 'rules', path.join(deploy, 'alerts.test.yml')], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /SUCCESS/);
});

test('every alert has a severity, a summary, a runbook entry in the README and a test that fires it', { skip }, () => {
  const rules = parse(readFileSync(path.join(deploy, 'alerts.yml'), 'utf8')) as {
    groups: { rules: { alert: string; labels: { severity: string }; annotations: { summary: string; runbook: string } }[] }[];
  };
  const alerts = rules.groups.flatMap((g) => g.rules);
  assert.ok(alerts.length >= 8, `${alerts.length} alerts`);
  const readme = readFileSync(path.join(deploy, '..', '..', 'README.md'), 'utf8');
  const tests = readFileSync(path.join(deploy, 'alerts.test.yml'), 'utf8');
  for (const a of alerts) {
    assert.match(a.labels.severity, /^(warning|critical)$/, a.alert);
    assert.ok(a.annotations.summary.length > 10, a.alert);
    assert.equal(a.annotations.runbook, `README.md#alerts: ${a.alert}`);
    assert.ok(readme.includes(`**${a.alert}**`), `README's Alerts section describes ${a.alert}`);
    // A case that fires (exp_alerts listing it) and one that must not (exp_alerts: [] or a series beside it).
    const cases = tests.split(/\n\s+- eval_time:/).filter((c) => c.includes(`alertname: ${a.alert}\n`));
    assert.ok(
      cases.some((c) => /exp_labels/.test(c)),
      `${a.alert} has a test case that fires`,
    );
  }
});
