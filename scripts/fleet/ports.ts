import { createServer } from 'node:net';

/** A port free on 127.0.0.1 now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Polls `ready` every 200 ms until it says yes; throws naming `what` after `withinMs`. */
export async function waitFor(what: string, withinMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`fleet: ${what} was not ready within ${Math.round(withinMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
