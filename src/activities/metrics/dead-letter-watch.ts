import { stat } from 'node:fs/promises';
import { isObjectUrl } from '../storage/location';
import { storageFor } from '../storage/storage';
import type { WorkerMetrics } from './worker-metrics';

interface Watched {
  manifest: string;
  mtimeMs: number;
}

/**
 * `tilebreaker_dead_letters_pending` for the mosaics this process assembled. A gauge is per process: the
 * worker that assembled a run with dead letters would show them for ever, even after a re-drive that another
 * worker assembled cleared them. So while a mosaic has dead letters here, this process looks at its manifest
 * (the re-drive rewrites it) every `intervalMs` and shows what it says now: `max by (mosaic)` over the fleet
 * is then the current figure, within the interval, wherever the re-drive ran. A manifest that is gone or
 * unreadable leaves the gauge as it was.
 */
export class DeadLetterWatch {
  private readonly watched = new Map<string, Watched>();
  private readonly timer: NodeJS.Timeout;
  private checking = false;

  constructor(
    private readonly metrics: WorkerMetrics,
    intervalMs = 60_000,
  ) {
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  /** A run of `mosaic` ended here with `pending` dead letters, written to `manifest`. */
  async finished(mosaic: string, manifest: string, pending: number): Promise<void> {
    this.metrics.deadLettersPending(mosaic, pending);
    if (pending === 0) {
      this.watched.delete(mosaic);
      return;
    }
    const mtimeMs = await modifiedAt(manifest).then(
      (t) => t ?? 0,
      () => 0,
    );
    this.watched.set(mosaic, { manifest, mtimeMs });
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Reads again the manifests that changed since this process last looked. */
  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      for (const [mosaic, w] of this.watched) {
        try {
          const mtimeMs = await modifiedAt(w.manifest);
          if (mtimeMs !== null && mtimeMs === w.mtimeMs) continue;
          w.mtimeMs = mtimeMs ?? 0;
          const body = await storageFor(w.manifest).read(w.manifest);
          if (body === null) continue;
          const m = JSON.parse(body.toString('utf8')) as { counts?: Record<string, unknown> };
          const pending = m.counts?.['dead-lettered'];
          if (typeof pending !== 'number') continue;
          this.metrics.deadLettersPending(mosaic, pending);
          if (pending === 0) this.watched.delete(mosaic);
        } catch {
          // Gone, being rewritten or not ours: the gauge stays as it was until a readable manifest says otherwise.
        }
      }
    } finally {
      this.checking = false;
    }
  }
}

/** A local manifest's modification time; null for one in a bucket, which is read again at every check. */
async function modifiedAt(manifest: string): Promise<number | null> {
  return isObjectUrl(manifest) ? null : (await stat(manifest)).mtimeMs;
}
