/**
 * Outputs, tile stores and manifests may be local paths or objects in an S3-compatible bucket, written as
 * `s3://bucket/key`. Pure, so clients and workflows can tell them apart without the activities' I/O.
 */
export const S3_SCHEME = 's3://';

export const isObjectUrl = (loc: string): boolean => loc.startsWith(S3_SCHEME);
