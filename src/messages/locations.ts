/**
 * Outputs, tile stores and manifests may be local paths or objects in an S3-compatible bucket, written as
 * `s3://bucket/key`. Pure, so clients and workflows can tell them apart without the activities' I/O.
 */
export const S3_SCHEME = 's3://';

export const isObjectUrl = (loc: string): boolean => loc.startsWith(S3_SCHEME);

/**
 * What a request or a plan needs of the worker that handles it, named so that a worker without it refuses the
 * request or plan (the release before object storage checks both strictly, and would otherwise take
 * `s3://bucket/x.tif` for a relative path and write local files). Only emitted when needed: a request without
 * one stays one every earlier release accepts. A worker refuses a capability it does not know.
 */
export const CAPABILITIES = ['object-storage'] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** The capabilities a request or plan with these locations needs (`object-storage` for any `s3://`). */
export function capabilitiesFor(locations: readonly (string | undefined)[]): Capability[] {
  return locations.some((l) => l !== undefined && isObjectUrl(l)) ? ['object-storage'] : [];
}
