import assert from 'node:assert/strict';
import { test } from 'node:test';
import { STORE_RETRY_MS, StoreRetry } from '../../src/activities/storage/s3-retry';

test("the S3 client's retries: a transient failure is retried with a growing, bounded wait until the budget is spent; an error that will not change is thrown at once", async () => {
  let now = 1_000;
  const retry = new StoreRetry(
    STORE_RETRY_MS,
    () => now,
    () => 0.5,
  );
  let token = await retry.acquireInitialRetryToken('s3');
  const delays: number[] = [];
  const refused = new Error('connect ECONNREFUSED');
  for (;;) {
    try {
      token = await retry.refreshRetryTokenForRetry(token, { errorType: 'TRANSIENT', error: refused });
    } catch (err) {
      assert.equal(err, refused, 'the last error, as the SDK would throw it');
      break;
    }
    delays.push(token.getRetryDelay());
    now += token.getRetryDelay();
  }
  // 75 ms doubling (100 ms halved and three quarters of the rest), then 1.5 s each, until 30 s have gone.
  assert.deepEqual(delays.slice(0, 6), [75, 150, 300, 600, 1_200, 1_500]);
  assert.ok(now - 1_000 <= STORE_RETRY_MS && now - 1_000 > STORE_RETRY_MS - 1_500, `waited ${now - 1_000} ms`);
  assert.equal(token.getRetryCount(), delays.length);

  const throttled = await retry.refreshRetryTokenForRetry(await retry.acquireInitialRetryToken('s3'), {
    errorType: 'THROTTLING',
    error: new Error('SlowDown'),
  });
  assert.equal(throttled.getRetryCount(), 1);
  const denied = new Error('AccessDenied');
  await assert.rejects(
    retry.refreshRetryTokenForRetry(await retry.acquireInitialRetryToken('s3'), {
      errorType: 'CLIENT_ERROR',
      error: denied,
    }),
    (err) => err === denied,
  );
});
