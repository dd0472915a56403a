import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Slots } from '../../src/activities/http/slots';

test('slots: n holders, first come first served, a released slot passes to the next waiter, an aborted waiter leaves', async () => {
  const s = new Slots(2);
  const a = await s.acquire();
  const b = await s.acquire();
  const order: string[] = [];
  const c = s.acquire().then((x) => (order.push('c'), x));
  const abort = new AbortController();
  const d = s.acquire(abort.signal).then((x) => (order.push(x ? 'd' : 'd-aborted'), x));
  const e = s.acquire().then((x) => (order.push('e'), x));
  assert.deepEqual(s.usage, { held: 2, queued: 3 });
  abort.abort();
  assert.equal(await d, null);
  a!.release();
  a!.release(); // twice: no effect
  await c;
  assert.deepEqual(s.usage, { held: 2, queued: 1 });
  b!.release();
  (await e)!.release();
  (await c)!.release();
  assert.deepEqual(order, ['d-aborted', 'c', 'e']);
  assert.deepEqual(s.usage, { held: 0, queued: 0 });
  assert.equal(await s.acquire(AbortSignal.abort()), null);
});
