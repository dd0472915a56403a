import { fork } from 'node:child_process';
import path from 'node:path';
import { adopt } from '../../src/demo/children';

/** The demo tile server in its own process (server-child), so it shares no event loop with what it measures. */
export async function startServer(latencyMs: number): Promise<{ url: string; pid: number; stop: () => void }> {
  const child = adopt(
    fork(path.join(__dirname, 'server-child.js'), [String(latencyMs)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (code) => reject(new Error(`tile server exited (${code})`)));
  });
  return { url, pid: child.pid!, stop: () => child.kill() };
}
