import { setTimeout as delay } from 'node:timers/promises';

/** Waits `ms`, or less if `signal` aborts. The abort listener goes when the timer fires: a batch retries many times on one signal. */
/** Node's own abortable timer (it removes its abort listener when it fires): resolves early on abort. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, signal ? { signal } : {}).catch(() => undefined);
}
