import type { Client } from '@temporalio/client';
import { pageBreakers } from './breakers-view';
import type { MosaicsView } from './mosaics-view';

const OVERVIEW_TTL_MS = 1_000;

/** What the overview is read from. */
export interface OverviewSource {
  client: Client;
  mosaics: MosaicsView;
  allowActions: boolean;
  /** The clock (tests). */
  now: () => number;
}

/**
 * The page's overview (breakers and mosaics). Every open page reads it each second: one read at a time serves
 * them all, for a second.
 */
export class OverviewCache {
  private overview: { at: number; body: Promise<unknown> } | null = null;

  constructor(private readonly from: OverviewSource) {}

  /** The overview read less than a second ago, or a new read. */
  read(): Promise<unknown> {
    const t = this.from.now();
    if (this.overview && t - this.overview.at < OVERVIEW_TTL_MS) return this.overview.body;
    const { client, mosaics, allowActions } = this.from;
    const body = Promise.all([pageBreakers(client, t), mosaics.list()]).then(([breakers, list]) => ({
      now: t,
      allowActions,
      breakers,
      mosaics: list,
    }));
    this.overview = { at: t, body };
    // A failed read is not served to the next page.
    body.catch(() => {
      if (this.overview?.body === body) this.overview = null;
    });
    return body;
  }

  /** After an action: the next page reads anew. */
  clear(): void {
    this.overview = null;
  }
}
