import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { stringify } from 'yaml';
import { freePort } from './mapserver';

/**
 * A real Prometheus on loopback (Debian's `prometheus` package; `.ci/run` installs it): scraping `targets`
 * every second, evaluating tilebreaker's alert rules (deploy/prometheus/alerts.yml) every second, its data in
 * a temporary folder. The package's own service (port 9090) is not used.
 */
export interface Prometheus {
  url: string;
  /** An instant query's vector: labels and value of each series. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: number }[]>;
  /** The alerts Prometheus holds now (pending or firing). */
  alerts(): Promise<{ labels: Record<string, string>; state: 'pending' | 'firing' }[]>;
  stop(): Promise<void>;
}

const PROMETHEUS = '/usr/bin/prometheus';
const RULES = path.join(__dirname, '..', '..', '..', 'deploy', 'prometheus', 'alerts.yml');

export function prometheusAvailable(): boolean {
  return existsSync(PROMETHEUS);
}

export async function startPrometheus(targets: string[]): Promise<Prometheus> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-prometheus-'));
  copyFileSync(RULES, path.join(dir, 'alerts.yml'));
  writeFileSync(
    path.join(dir, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: ['alerts.yml'],
      scrape_configs: [{ job_name: 'tilebreaker-workers', static_configs: [{ targets }] }],
    }),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    PROMETHEUS,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const api = async <T>(p: string): Promise<T> => {
    const res = await fetch(`${url}${p}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${p}: ${body.error ?? res.status}`);
    return body.data;
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}): ${stderr}`);
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > 300) throw new Error(`prometheus did not become ready in 30 s: ${stderr}`);
    await delay(100);
  }
  return {
    url,
    async query(expr) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      );
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    async alerts() {
      const data = await api<{ alerts: { labels: Record<string, string>; state: 'pending' | 'firing' }[] }>(
        '/api/v1/alerts',
      );
      return data.alerts;
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
