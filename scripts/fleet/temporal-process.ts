/**
 * A Temporal dev server as a child process on a fixed port with its state in a SQLite file, so it can be
 * stopped for a while and started again on the same address and history, as a real cluster's outage looks
 * to a fleet.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { adopt } from '../../src/demo/children';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { freePort, waitFor } from './ports';

const CLI_TYPES: Record<string, string> = {
  KEYWORD: 'Keyword',
  INT: 'Int',
  TEXT: 'Text',
  BOOL: 'Bool',
  DOUBLE: 'Double',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};

export interface TemporalProcess {
  address: string;
  start(): Promise<void>;
  /** SIGTERM (or `signal`), then SIGKILL after 10 s; the database stays. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function temporalProcess(cli: string, dbFile: string): Promise<TemporalProcess> {
  const [port, httpPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const address = `127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--http-port',
    String(httpPort),
    '--metrics-port',
    String(metricsPort),
    '--headless',
    '--db-filename',
    dbFile,
    '--log-level',
    'error',
    ...ALL_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=${CLI_TYPES[k.type] ?? 'Keyword'}`]),
  ];
  const start = async () => {
    const c = adopt(spawn(cli, args, { stdio: ['ignore', 'ignore', 'pipe'] }));
    c.stderr?.resume();
    child = c;
    await waitFor(`the Temporal server on ${address}`, 60_000, async () => {
      if (c.exitCode !== null) throw new Error(`the Temporal server exited with code ${c.exitCode}`);
      const conn = await Connection.connect({ address, connectTimeout: 1_000 }).catch(() => null);
      if (!conn) return false;
      try {
        await conn.workflowService.getSystemInfo({});
        return true;
      } catch {
        return false;
      } finally {
        await conn.close();
      }
    });
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill(signal);
    const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return { address, start, stop };
}
