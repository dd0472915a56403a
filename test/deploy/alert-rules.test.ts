import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';

const deploy = path.join(__dirname, '..', '..', '..', 'deploy', 'prometheus');
/** The metrics the workers export (docs/metrics.md), as Prometheus names them. */
const METRICS = [
  'tilebreaker_circuit_open_total',
  'tilebreaker_circuit_trips_total',
  'tilebreaker_circuit_closes_total',
  'tilebreaker_breaker_transitions_total',
  'tilebreaker_breaker_open_seconds_total',
  'tilebreaker_probes_total',
  'tilebreaker_breaker_state',
  'tilebreaker_requests_total',
  'tilebreaker_request_duration_seconds',
  'tilebreaker_not_permitted_total',
  'tilebreaker_guard_fail_open_total',
  'tilebreaker_guard_reports_dropped_total',
  'tilebreaker_guard_entity_wedged_total',
  'tilebreaker_fallback_total',
  'tilebreaker_mosaic_tiles_total',
  'tilebreaker_mosaics_finished_total',
  'tilebreaker_dead_letters_pending',
];
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

test(
  'every alert has a severity, a summary, a runbook entry in docs/alerts.md and a test that fires it',
  { skip },
  () => {
    const rules = parse(readFileSync(path.join(deploy, 'alerts.yml'), 'utf8')) as {
      groups: {
        rules: { alert: string; labels: { severity: string }; annotations: { summary: string; runbook: string } }[];
      }[];
    };
    const alerts = rules.groups.flatMap((g) => g.rules);
    assert.ok(alerts.length >= 8, `${alerts.length} alerts`);
    const runbook = readFileSync(path.join(deploy, '..', '..', 'docs', 'alerts.md'), 'utf8');
    const tests = readFileSync(path.join(deploy, 'alerts.test.yml'), 'utf8');
    for (const a of alerts) {
      assert.match(a.labels.severity, /^(warning|critical)$/, a.alert);
      assert.ok(a.annotations.summary.length > 10, a.alert);
      assert.equal(a.annotations.runbook, `docs/alerts.md: ${a.alert}`);
      assert.ok(runbook.includes(`**${a.alert}**`), `docs/alerts.md describes ${a.alert}`);
      // A case that fires (exp_alerts listing it) and one that must not (exp_alerts: [] or a series beside it).
      const cases = tests.split(/\n\s+- eval_time:/).filter((c) => c.includes(`alertname: ${a.alert}\n`));
      assert.ok(
        cases.some((c) => /exp_labels/.test(c)),
        `${a.alert} has a test case that fires`,
      );
    }
  },
);

test(
  'one page per incident: in the 40-minute outage case, every critical alert is asserted, and only StuckOpen fires, once',
  { skip },
  () => {
    const rules = parse(readFileSync(path.join(deploy, 'alerts.yml'), 'utf8')) as {
      groups: { rules: { alert?: string; labels?: { severity?: string } }[] }[];
    };
    const critical = rules.groups
      .flatMap((g) => g.rules)
      .filter((r) => r.alert && r.labels?.severity === 'critical')
      .map((r) => r.alert!);
    assert.ok(critical.includes('TilebreakerStuckOpen'), critical.join(', '));
    const file = parse(readFileSync(path.join(deploy, 'alerts.test.yml'), 'utf8')) as {
      tests: {
        input_series: { series: string }[];
        alert_rule_test?: {
          eval_time: string;
          alertname: string;
          exp_alerts: { exp_labels: Record<string, string> }[];
        }[];
      }[];
    };
    const outage = file.tests.find((g) =>
      g.input_series.some((x) => x.series.includes('endpoint="http://outage-40m:80"')),
    );
    assert.ok(outage?.alert_rule_test, 'alerts.test.yml has the 40-minute outage case (endpoint http://outage-40m:80)');
    const cases = outage.alert_rule_test;
    // The moments the page is expected: StuckOpen firing for that endpoint, and for nothing else.
    const paged = cases.filter((c) => c.alertname === 'TilebreakerStuckOpen' && c.exp_alerts.length > 0);
    assert.ok(paged.length >= 2, 'StuckOpen fires at two moments or more of the outage');
    for (const p of paged) {
      assert.deepEqual(
        p.exp_alerts.map((a) => a.exp_labels['endpoint']),
        ['http://outage-40m:80'],
        `at ${p.eval_time}`,
      );
      for (const alert of critical.filter((a) => a !== 'TilebreakerStuckOpen')) {
        const c = cases.find((x) => x.alertname === alert && x.eval_time === p.eval_time);
        assert.ok(
          c,
          `the 40-minute outage case asserts ${alert} at ${p.eval_time} (a critical alert: it must not page a second time for one outage)`,
        );
        assert.deepEqual(c.exp_alerts, [], `${alert} fires at ${p.eval_time} in the 40-minute outage: a second page`);
      }
    }
    // No flapping at any of those moments.
    for (const p of paged)
      assert.ok(
        cases.some(
          (x) =>
            x.alertname === 'TilebreakerBreakerFlapping' && x.eval_time === p.eval_time && x.exp_alerts.length === 0,
        ),
        `Flapping asserted silent at ${p.eval_time}`,
      );
  },
);

test(
  "docker-compose's Prometheus scrapes every worker with the alert rules loaded (promtool check config)",
  { skip },
  () => {
    const check = spawnSync('promtool', ['check', 'config', path.join(deploy, 'prometheus.yml')], { encoding: 'utf8' });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    assert.match(check.stdout, /1 rule files found/);
    const compose = parse(readFileSync(path.join(deploy, '..', '..', 'docker-compose.yml'), 'utf8')) as {
      services: Record<
        string,
        { environment?: Record<string, string>; volumes?: string[]; ports?: string[]; expose?: (string | number)[] }
      >;
    };
    const { worker, prometheus } = compose.services;
    const addr = worker!.environment!['TILEBREAKER_METRICS_ADDR']!;
    const scrape = parse(readFileSync(path.join(deploy, 'prometheus.yml'), 'utf8')) as {
      scrape_configs: { dns_sd_configs: { names: string[]; port: number }[] }[];
    };
    const sd = scrape.scrape_configs[0]!.dns_sd_configs[0]!;
    assert.deepEqual(
      [sd.names, sd.port],
      [['worker'], Number(addr.split(':')[1])],
      'the scrape finds the worker service on its metrics port',
    );
    assert.ok(prometheus!.volumes!.includes('./deploy/prometheus:/etc/prometheus:ro'));
    // Prometheus has no authentication: loopback only, as the frontend and the UI.
    assert.ok(
      prometheus!.ports!.every((p) => p.startsWith('127.0.0.1:')),
      JSON.stringify(prometheus!.ports),
    );
  },
);

test(
  'the dashboard is valid JSON whose every query is valid PromQL on the metrics the workers export; the alerts use only those metrics',
  { skip },
  () => {
    const dash = JSON.parse(readFileSync(path.join(deploy, '..', 'dashboards', 'tilebreaker.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const exprs = dash.panels.flatMap((p) =>
      p.targets.map((t) => ({ title: p.title, expr: t.expr.replaceAll('$__rate_interval', '5m') })),
    );
    assert.ok(exprs.length >= 10);
    // promtool parses PromQL in rule files: each query becomes a recording rule.
    const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-dashboard-'));
    try {
      const rules = {
        groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `dashboard:q${i}`, expr: e.expr })) }],
      };
      writeFileSync(path.join(dir, 'rules.yml'), stringify(rules));
      const check = spawnSync('promtool', ['check', 'rules', path.join(dir, 'rules.yml')], { encoding: 'utf8' });
      assert.equal(check.status, 0, check.stdout + check.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const { title, expr } of exprs) {
      for (const name of expr.match(/tilebreaker_[a-z_]+/g) ?? [])
        assert.ok(
          METRICS.includes(name.replace(/_bucket$/, '')),
          `${title}: ${name} is not a metric the workers export`,
        );
    }
    const alerts = readFileSync(path.join(deploy, 'alerts.yml'), 'utf8');
    for (const name of alerts.match(/tilebreaker_[a-z_]+/g) ?? [])
      assert.ok(METRICS.includes(name), `alerts.yml: ${name} is not a metric the workers export`);
  },
);
