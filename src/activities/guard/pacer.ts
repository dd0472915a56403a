import { rateShare, type BreakerView } from '../../breaker';
import type { EntityLink } from './entity-link';
import type { ReportSender } from './report-sender';
import type { ResolvedGuardOptions } from './types';
import { CLOSED_VIEW, type ViewCache } from './view-cache';

interface KeyPace {
  /** The latest call slot taken under the endpoint's rate limit. */
  lastSlotAt: number;
  joining: Promise<void> | null;
  /** Last use of the key's rate limit, and the timer that keeps this process counted meanwhile. */
  lastRateUseAt: number;
  keepalive: NodeJS.Timeout | null;
  /** This process's share (requests/s, before any ramp) as the entity last published it: kept when failing open. */
  share: number | null;
}

const KEEPALIVE_EVERY_MS = 2_000;
const KEEPALIVE_IDLE_MS = 10_000;
const MAX_SLOT_GAP_MS = 60_000;

const JOIN_SETTLE_MS = 300;
const JOIN_READS = 8;
const JOIN_READ_EVERY_MS = 100;

/**
 * Calls to a rate-limited endpoint: this process's share of the fleet-wide rate (the entity counts the
 * workers that report), its calls spaced at that share, and its place among the sharers kept while it uses
 * the key.
 */
export class Pacer {
  private readonly keys = new Map<string, KeyPace>();
  private closed = false;

  constructor(
    private readonly o: Pick<ResolvedGuardOptions, 'config'>,
    private readonly link: EntityLink,
    private readonly views: ViewCache,
    private readonly reports: ReportSender,
  ) {}

  /**
   * This process's share of a rate-limited endpoint (requests/s), or null without a limit. Joins the entity's
   * count of sharers first if it is not in it, and keeps it there while the key is in use.
   */
  async rateFor(key: string, view: BreakerView | null, allowance: number): Promise<number | null> {
    // No entity yet: the rate this guard would create it with.
    const ownRate = this.o.config?.maxRequestsPerSecond ?? null;
    let rateView = view ?? (ownRate ? { ...CLOSED_VIEW, rateLimit: ownRate, activeReporters: 0 } : null);
    if (rateView?.rateLimit === undefined) {
      // The limit was lifted: failing open later must not keep an old share.
      const known = this.keys.get(key);
      if (known) known.share = null;
      return null;
    }
    const kp = this.entry(key);
    kp.lastRateUseAt = Date.now();
    this.keepCounted(key, kp);
    if (kp.joining) await kp.joining;
    if (Date.now() - this.reports.reportedAt(key) >= this.reports.countedForMs(key)) {
      // Not among the rate's sharers yet: tell the entity, and read the count that includes this process,
      // so that workers starting together do not each take the whole rate.
      kp.joining ??= this.join(key, rateView.activeReporters ?? 0).finally(() => (kp.joining = null));
      await kp.joining;
      rateView = this.views.last(key) ?? rateView;
    }
    const counted = Date.now() - this.reports.reportedAt(key) < this.reports.countedForMs(key);
    kp.share = rateShare(rateView, 1, counted);
    return rateShare(rateView, allowance, counted);
  }

  /** This process's share (requests/s) as the entity last published it, kept for failing open (decide.ts); null: none. */
  knownShare(key: string): number | null {
    return this.keys.get(key)?.share ?? null;
  }

  /**
   * Spaces this process's calls to a rate-limited endpoint at its share of the fleet-wide rate: each call
   * takes the next slot 1/rate after the previous one at the current rate (no bursts), whichever activity
   * makes it. A gap is capped at MAX_SLOT_GAP_MS (a tiny share at the start of a ramp must not park a call
   * for hours, nor overflow a timer).
   */
  async pace(key: string, rate: number): Promise<void> {
    const kp = this.entry(key);
    const now = Date.now();
    const gap = Math.min(1_000 / rate, MAX_SLOT_GAP_MS);
    // The first call takes a random slot within the first gap: workers starting together do not burst.
    const slot = kp.lastSlotAt === 0 ? now + Math.random() * gap : Math.max(now, kp.lastSlotAt + gap);
    kp.lastSlotAt = slot;
    if (slot > now) await new Promise((r) => setTimeout(r, slot - now));
  }

  /** Stops the keep-alive timers. */
  stop(): void {
    this.closed = true;
    for (const kp of this.keys.values()) {
      if (kp.keepalive) clearInterval(kp.keepalive);
      kp.keepalive = null;
    }
  }

  private entry(key: string): KeyPace {
    let kp = this.keys.get(key);
    if (!kp) {
      kp = { lastSlotAt: 0, joining: null, lastRateUseAt: 0, keepalive: null, share: null };
      this.keys.set(key, kp);
    }
    return kp;
  }

  /**
   * A worker whose share is small calls less often than the entity forgets sharers (5 s): an empty report
   * every 2 s while the key is in use keeps it counted, so the others' shares do not grow past the limit.
   */
  private keepCounted(key: string, kp: KeyPace): void {
    if (kp.keepalive || this.closed) return;
    kp.keepalive = setInterval(() => {
      if (Date.now() - kp.lastRateUseAt > KEEPALIVE_IDLE_MS) {
        clearInterval(kp.keepalive!);
        kp.keepalive = null;
        return;
      }
      // (A process that reports less often in a large fleet is counted for longer: report-spacing.ts.)
      if (
        Date.now() - this.reports.reportedAt(key) >= Math.max(KEEPALIVE_EVERY_MS, this.reports.everyMs(key)) &&
        this.reports.empty(key)
      )
        this.link.track(this.reports.sendEmpty(key));
    }, KEEPALIVE_EVERY_MS);
    kp.keepalive.unref();
  }

  /** An empty report, so the entity counts this process among a rate-limited endpoint's sharers at once. */
  private async join(key: string, countBefore: number): Promise<void> {
    await this.reports.sendEmpty(key);
    // The entity publishes its new count in the memo within a workflow task or two: wait long enough for
    // workers starting at the same moment to be counted together, then read until the count shows this one.
    await new Promise((r) => setTimeout(r, JOIN_SETTLE_MS));
    for (let i = 0; i < JOIN_READS; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, JOIN_READ_EVERY_MS));
      this.views.invalidate(key);
      const v = await this.views.get(key);
      if (!v || (v.activeReporters ?? 0) > countBefore) return;
    }
  }
}
