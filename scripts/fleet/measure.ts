/** The fleet demo's figures: what the bucket holds of a mosaic, and who ran its fetch batches. */
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';

interface ManifestLike {
  total?: number;
  image?: string;
  width?: number;
  height?: number;
  counts?: Record<string, number>;
  tiles?: { i: number; status: string }[];
}

const split = (url: string) => {
  const rest = url.replace(/^s3:\/\//, '');
  const slash = rest.indexOf('/');
  return { Bucket: rest.slice(0, slash), Key: rest.slice(slash + 1) };
};

/**
 * Planned tiles the bucket does not account for: those absent from the manifest, or every tile when the
 * manifest or the output image is missing (or not of the planned size).
 */
export async function missingTiles(
  s3: S3Client,
  output: string,
  manifestUrl: string,
  total: number,
  width: number,
  height: number,
): Promise<{ missing: number; ok: number; manifest: ManifestLike | null }> {
  let manifest: ManifestLike;
  try {
    const out = await s3.send(new GetObjectCommand(split(manifestUrl)));
    manifest = JSON.parse(await out.Body!.transformToString()) as ManifestLike;
  } catch {
    return { missing: total, ok: 0, manifest: null };
  }
  const image = await s3.send(new HeadObjectCommand(split(output))).then(
    (h) => (h.ContentLength ?? 0) > 0,
    () => false,
  );
  if (!image || manifest.image !== 'written' || manifest.width !== width || manifest.height !== height)
    return { missing: total, ok: manifest.counts?.['ok'] ?? 0, manifest };
  const seen = new Set(
    (manifest.tiles ?? []).map((t) => t.i).filter((i) => Number.isInteger(i) && i >= 0 && i < total),
  );
  return { missing: total - seen.size, ok: manifest.counts?.['ok'] ?? 0, manifest };
}

/** Fetch batches by the worker identity that ran them (the attempt that ended each), over a workflow and its children. */
export async function batchesByWorker(client: Client, workflowId: string): Promise<Map<string, number>> {
  const ids = [workflowId];
  for await (const wf of client.workflow.list({ query: `WorkflowId STARTS_WITH "${workflowId}/"` }))
    ids.push(wf.workflowId);
  const by = new Map<string, number>();
  for (const id of ids) {
    const events = (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
    const fetches = new Set<string>();
    for (const e of events) {
      if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'fetchMosaicBatch')
        fetches.add(String(e.eventId));
      const started = e.activityTaskStartedEventAttributes;
      if (started && fetches.has(String(started.scheduledEventId)))
        by.set(started.identity ?? '?', (by.get(started.identity ?? '?') ?? 0) + 1);
    }
  }
  return by;
}
