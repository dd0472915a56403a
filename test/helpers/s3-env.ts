import { resetS3Client } from '../../src/activities/storage/s3-client';

/**
 * Points this process's S3 client at a test server through the AWS SDK's own variables, as a worker or a
 * console host reads them; returns what puts the environment back.
 */
export function useS3Env(vars: Record<string, string>): () => void {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  resetS3Client();
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetS3Client();
  };
}
