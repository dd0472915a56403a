/** Starts the counting proxy (proxy-child) in a child process and reads its figures over IPC. */
import { fork } from 'node:child_process';
import path from 'node:path';
import type { ProxyStats } from './proxy-child';

export type { ProxyStats };

export interface CountingProxy {
  /** The same path as the upstream URL, on the proxy's port. */
  url: string;
  pid: number;
  reset(): Promise<void>;
  stats(): Promise<ProxyStats>;
  stop(): void;
}

/** `serverPid`: lighttpd's, for the peak of mapserv processes running at once. */
export async function startCountingProxy(upstreamUrl: string, serverPid: number): Promise<CountingProxy> {
  const up = new URL(upstreamUrl);
  const child = fork(path.join(__dirname, 'proxy-child.js'), [up.origin, String(serverPid)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('exit', (code) => reject(new Error(`counting proxy exited (${code})`)));
  });
  const ask = <T>(cmd: 'reset' | 'stats', type: string) =>
    new Promise<T>((resolve) => {
      const on = (m: { type: string; stats?: ProxyStats }) => {
        if (m.type !== type) return;
        child.off('message', on);
        resolve(m as T);
      };
      child.on('message', on);
      child.send(cmd);
    });
  return {
    url: `http://127.0.0.1:${port}${up.pathname}`,
    pid: child.pid!,
    reset: async () => {
      await ask('reset', 'reset');
    },
    stats: async () => (await ask<{ stats: ProxyStats }>('stats', 'stats')).stats,
    stop: () => {
      child.disconnect();
      child.kill();
    },
  };
}
