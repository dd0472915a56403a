import { S3Client } from '@aws-sdk/client-s3';
import { StoreRetry } from './s3-retry';

/** `TILEBREAKER_S3_PATH_STYLE=1`: `http://host/bucket/key` addressing, for S3-compatible servers other than AWS. */
export const S3_PATH_STYLE_ENV = 'TILEBREAKER_S3_PATH_STYLE';

let shared: S3Client | undefined;

/**
 * The process's S3 client. Endpoint, region and credentials come from the AWS SDK's own chain
 * (`AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
 * profiles, container and instance roles); without a region, us-east-1, which S3-compatible servers accept.
 */
export function s3Client(env: NodeJS.ProcessEnv = process.env): S3Client {
  if (shared) return shared;
  const pathStyle = env[S3_PATH_STYLE_ENV];
  if (pathStyle !== undefined && !['0', '1', 'true', 'false', ''].includes(pathStyle)) {
    throw new Error(`${S3_PATH_STYLE_ENV}: must be 1, 0, true or false (got ${JSON.stringify(pathStyle)})`);
  }
  shared = new S3Client({
    region: env['AWS_REGION'] || env['AWS_DEFAULT_REGION'] || 'us-east-1',
    forcePathStyle: pathStyle === '1' || pathStyle === 'true',
    // A store restarting is waited out (about 30 s, each call on its own): a tile already fetched is stored,
    // not fetched again by a retried batch. Longer outages fail the batch, and its retry resumes.
    retryStrategy: new StoreRetry(),
  });
  return shared;
}

/** Drops the cached client (tests that change the environment between servers). */
export function resetS3Client(): void {
  shared?.destroy();
  shared = undefined;
}
