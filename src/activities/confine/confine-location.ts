import { ConfigError } from '../../breaker/config-error';
import { isObjectUrl, locationWithin, objectUrlRefusal } from '../storage/location';
import { confinePath } from './confine';
import { OUTPUT_BUCKETS_ENV, type WorkerRoots } from './roots';

/**
 * Where a requester asked the worker to write or read, checked like a path: a local path against the output
 * folders (after symlinks), an `s3://` URL against the bucket prefixes the operator allowed. Returns the
 * location to use; throws a ConfigError naming the field, the value and the roots.
 */
export async function confineLocation(
  loc: string,
  roots: WorkerRoots,
  field: string,
  subject: string,
): Promise<string> {
  if (!isObjectUrl(loc)) return confinePath(loc, roots.outputs, field, subject);
  const refuse = (why: string): never => {
    throw new ConfigError(subject, [`${field}: ${JSON.stringify(loc)} ${why}`]);
  };
  const shape = objectUrlRefusal(loc);
  if (shape) refuse(shape);
  const buckets = roots.buckets ?? [];
  if (buckets.length === 0)
    refuse(
      `cannot be used: this worker allows no bucket; set ${OUTPUT_BUCKETS_ENV} on the worker (s3://bucket/prefix, comma-separated)`,
    );
  if (!buckets.some((b) => locationWithin(loc, b)))
    refuse(
      `is outside this worker's bucket prefixes (${buckets.join(', ')}); set ${OUTPUT_BUCKETS_ENV} on the worker to allow it`,
    );
  return loc.replace(/\/+$/, '');
}
