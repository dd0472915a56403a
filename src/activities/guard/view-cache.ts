import type { BreakerView } from '../../breaker';
import { viewQuery } from '../../messages/breaker';
import { isNotFound, type EntityLink } from './entity-link';
import type { ReadBudget } from './read-budget';
import type { GuardStats } from './types';
import { pendingTaskOf, type PendingTask } from './wedge-watch';

export { CLOSED_VIEW } from './decide';

export interface CachedView {
  view: BreakerView | null;
  fetchedAt: number;
  inflight: Promise<BreakerView | null> | null;
  /** After a failed read: fail open at once until then, instead of waiting out another timeout per call (back-off: reachability.ts). */
  unreachableUntil: number;
  /** The first run id of the run `view` was read from: a continue-as-new's next run shares it. */
  chain?: string | undefined;
  /** The entity's workflow task waiting to be done at the last read (the wedge watch). */
  task?: PendingTask | null;
}

/** What one read of the entity found, and the run chain it came from. */
interface Read {
  view: BreakerView | null | 'starting';
  chain: string | undefined;
  /** The entity's workflow task waiting to be done, for the wedge watch. */
  task: PendingTask | null;
}

/**
 * This process's view of each key's entity: at most `cacheTtlMs` old, or longer when the read budget shares
 * this process's reads among many keys (a quarter of that while `fresher(key)` says this process is reporting
 * failures), one read in flight per key.
 */
export class ViewCache {
  constructor(
    private readonly keys: Map<string, CachedView>,
    private readonly link: EntityLink,
    private readonly stats: GuardStats,
    private readonly cacheTtlMs: number,
    private readonly fresher: (key: string) => boolean,
    /** Each view read from the entity (the state gauge). */
    private readonly onRead: (key: string, view: BreakerView | null) => void = () => {},
    /** Bounds this process's reads across its keys (read-budget.ts); none: every key is read every cacheTtlMs. */
    private readonly budget?: ReadBudget,
  ) {}

  /** The cached view; null when no entity exists; undefined when the entity cannot be reached. */
  async get(key: string): Promise<BreakerView | null | undefined> {
    const cv = this.entry(key);
    const now = Date.now();
    if (now < cv.unreachableUntil) return undefined;
    // While this process reports failures, its view is kept fresher (a quarter of the TTL), so it learns of
    // the trip its failures may have caused within moments, not at the next full refresh.
    // A rate-limited key is read every cacheTtlMs whatever the budget: its rate's share follows the sharers'
    // count in the view, and a stale count lets the fleet exceed the limit while workers join.
    const kept =
      this.budget && cv.view?.rateLimit === undefined ? this.budget.ttlMs(key, now, this.cacheTtlMs) : this.cacheTtlMs;
    const ttl = this.fresher(key) ? kept / 4 : kept;
    if (cv.fetchedAt && now - cv.fetchedAt < ttl) return cv.view;
    // Temporal did not answer the last read (of any key): fail open now rather than wait out another timeout;
    // the read goes on in the background, and the next call sees what it found.
    if (this.link.reach.down) {
      void this.read(key, cv).catch(() => undefined);
      return undefined;
    }
    try {
      return await this.read(key, cv);
    } catch {
      this.stats.waitedUnreachable++;
      return undefined;
    }
  }

  /** The read of `key` in flight, or a new one. */
  private read(key: string, cv: CachedView): Promise<BreakerView | null> {
    if (!cv.inflight) {
      this.stats.viewReads++;
      cv.inflight = this.link
        .rpc(() => this.describe(key))
        .then(
          (read) => {
            this.link.reach.answered();
            return read;
          },
          (err: unknown): Read => {
            if (isNotFound(err)) {
              this.link.reach.answered();
              return { view: null, chain: undefined, task: null };
            }
            cv.unreachableUntil = Date.now() + this.link.reach.failed(err);
            this.link.noteUnreachable(key, err);
            throw err;
          },
        )
        .then(({ view, chain, task }) => {
          cv.task = task;
          if (view === 'starting') {
            cv.fetchedAt = 0;
            // A run this young that continues the one we read (same first run id: a continue-as-new from code
            // before its memo was carried) holds that run's state: keep the last view rather than read the
            // breaker as closed until the new run's first task completes. A new chain (an entity terminated and
            // started afresh) is a new, closed breaker. A server that names no first run id keeps the view.
            return chain === undefined || cv.chain === undefined || chain === cv.chain ? cv.view : null;
          }
          cv.view = view;
          cv.chain = chain;
          cv.fetchedAt = Date.now();
          this.onRead(key, view);
          return view;
        })
        .finally(() => {
          cv.inflight = null;
        });
    }
    return cv.inflight;
  }

  /** The last view read, however old; null before any. */
  last(key: string): BreakerView | null {
    return this.keys.get(key)?.view ?? null;
  }

  /** The workflow task the entity had waiting at the last read of it; null if none. */
  task(key: string): PendingTask | null {
    return this.keys.get(key)?.task ?? null;
  }

  /** The state moved (or is about to): the next get() reads the entity again. */
  invalidate(key: string): void {
    this.entry(key).fetchedAt = 0;
  }

  private entry(key: string): CachedView {
    let cv = this.keys.get(key);
    if (!cv) {
      cv = { view: null, fetchedAt: 0, inflight: null, unreachableUntil: 0 };
      this.keys.set(key, cv);
    }
    return cv;
  }

  /**
   * The entity's view, from the memo it keeps (DescribeWorkflowExecution, answered by the server without the
   * worker), or by the `view` query from an entity that keeps none. A finished entity (idle) reads as none.
   */
  private async describe(key: string): Promise<Read> {
    const handle = this.link.handle(key);
    const d = await handle.describe();
    const chain = d.raw.workflowExecutionInfo?.firstRunId || undefined;
    if (d.status.name !== 'RUNNING') return { view: null, chain, task: null };
    const task = pendingTaskOf(d.raw);
    const view = d.memo?.['view'] as BreakerView | undefined;
    if (view) return { view, chain, task };
    // No memo yet: a run this young has not finished its first workflow task, so it is closed (but an admin
    // signal may be waiting in it, so the answer is not cached); an older one predates the memo: query it.
    const young = d.historyLength <= 10 || Date.now() - d.startTime.getTime() < 60_000;
    return { view: young ? 'starting' : await handle.query(viewQuery), chain, task };
  }
}
