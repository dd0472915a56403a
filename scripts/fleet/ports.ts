export { freePort } from '../../src/demo/s3-server';

/** Polls `ready` every 200 ms until it says yes; throws naming `what` after `withinMs`. */
export async function waitFor(what: string, withinMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`fleet: ${what} was not ready within ${Math.round(withinMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
