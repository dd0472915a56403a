import type { Client } from '@temporalio/client';
import type { WorkerRoots } from '../activities/confine/roots';
import type { MosaicsView } from './mosaics-view';
import type { OverviewCache } from './overview';

export interface ConsoleOptions {
  client: Client;
  /** The fleet's task queue: where a re-drive runs, and where an admin action starts an entity that is not running. */
  taskQueue: string;
  /** Where the worker writes: the console reads manifests and images only under these. */
  roots: WorkerRoots;
  /** 127.0.0.1 unless told otherwise. */
  host?: string;
  /** 0: any free port. */
  port?: number;
  /** Re-drive mosaics and open, force closed or reset breakers from the page. Off: the page only reads. */
  allowActions?: boolean;
  /** Who the page's actions are recorded as (the actor, claimed); the sender is this process, as for the CLI. */
  actor?: string;
  /** The clock (tests). */
  now?: () => number;
}

/** What the console's request handlers share. */
export interface ConsoleSite {
  opts: ConsoleOptions;
  /** `http://<host>:<port>`, once the server listens: the only Host it answers to, and the only Origin of actions. */
  origin: string;
  mosaics: MosaicsView;
  overview: OverviewCache;
}
